// MemoryState: recovery without the disk for strategies whose ranks each
// hold the whole training state (allreduce, hier, compressed: issue 34
// items 1 and 2).
//
// When a generation ends (a lost worker, a worker added, a hung peer), each
// rank keeps what it holds: its parameters (the model's, untouched), a host
// copy of its optimizer state (Retain), the step they belong to and the
// data position. The next generation starts with one small all-gather over
// its control mesh (TryRestore): every rank's kept step and a checksum of
// its parameters. The ranks agree on the newest step S any of them kept —
// all of them completed steps up to S, and one that completed S+1 before
// the failure holds S+1 whole — and the lowest rank holding it is the
// source. Ranks that kept S with the source's checksum continue from their
// own memory; the others (a survivor whose step failed, a worker added by
// `tandem add-worker`) receive parameters and optimizer state by broadcast
// from the source. Step, epoch and sample position are the source's, so
// the data stream resumes at the exact sample and the lost rank's unread
// samples of the epoch are cut into the new world's batches; nothing is
// redone. Strategy state other than the optimizer's (compressed's
// error-feedback residuals and velocity) is per rank and is reset to zero
// on every rank: the lost rank's residual is gone and a fresh one is what a
// run that drops that rank at S would have.
//
// Sharded strategies (zero1/2/3) recover from the peer replicas instead
// (peer_replica.h, peer_restore.h): MemoryState owns the PeerReplica,
// Replicate() feeds it after every step and TryRestore tries it when the
// replicated path does not apply (`from_peers`, at most --replica_every
// steps redone).
//
// The disk checkpoint stays the path when memory cannot serve: ps and
// hybrid (state on the shard servers), a shard with no surviving copy
// (`not_from_peers` says why), a fresh process set (a whole-job restart),
// --recover_from_memory=false, or a committed checkpoint newer than
// anything kept. The caller calls Invalidate() before it overwrites
// the parameters from disk, so a restore interrupted half-way is never
// mistaken for a rank's own state.
//
// Memory: one host copy of the optimizer state (1x the parameters for SGD
// with momentum, 2x for AdamW), allocated at the first generation end and
// reused. Thread-compatible (the trainer thread). Borrows backend and
// model. Failure: TryRestore returns the communicator's error (a
// membership problem: the caller re-joins; ranks that received nothing
// keep their state for the next try).
#ifndef TANDEM_SERVICES_WORKER_MEMORY_STATE_H_
#define TANDEM_SERVICES_WORKER_MEMORY_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "services/worker/generation.h"
#include "services/worker/peer_replica.h"

namespace tandem {
namespace worker {

// What TryRestore decided (the same on every rank).
struct MemoryRecovery {
  bool restored = false;   // from memory; false: use the disk checkpoint
  int64_t step = -1;       // the agreed step (restored)
  int64_t epoch = 0;
  int64_t samples_in_epoch = 0;
  int source = 0;          // rank whose state was taken
  int received = 0;        // ranks that got the state by broadcast
  // The newest step any rank of this generation had reached (-1: none had
  // trained in this process, e.g. a whole-job restart).
  int64_t reached = -1;
  // Sharded strategies: rebuilt from the peer replicas (`received`: the
  // shards that came from a neighbour's copy), or why not ("" when there
  // were none to try).
  bool from_peers = false;
  std::string not_from_peers;
};

class MemoryState {
 public:
  MemoryState(bool enabled, kernels::Backend* backend, nn::Model* model,
              const PeerReplicaOptions& peers = PeerReplicaOptions{0, false, {}})
      : enabled_(enabled), backend_(backend), model_(model), peers_(peers, backend, model) {}

  // The strategy holds every parameter and the optimizer state for all of
  // them on every rank.
  static bool Replicated(Generation& g, int64_t total_params);

  // At a generation's end, before it is destroyed: keeps the optimizer
  // state of `step` (replicated strategies; the data position `epoch`,
  // `samples_in_epoch` with it) and the step reached. A no-op when this
  // generation's restore did not complete (MarkLive).
  void Retain(Generation& g, int64_t step, int64_t epoch, int64_t samples_in_epoch);
  // The parameters are about to be overwritten by someone else's.
  void Invalidate() { step_ = -1; }
  // The restore completed: the generation's strategy holds the live state.
  void MarkLive() { live_ = true; }

  // After every applied step (the trainer thread): sharded strategies'
  // peer replica every --replica_every steps (PeerReplica::MaybeSnapshot).
  absl::Status Replicate(Generation& g, int64_t step, int64_t epoch, int64_t samples_in_epoch) {
    if (!enabled_) return absl::OkStatus();
    return peers_.MaybeSnapshot(g, step, epoch, samples_in_epoch);
  }
  // Host memory the peer replicas hold (tandem_replica_bytes).
  int64_t replica_bytes() const { return peers_.bytes(); }

  // Collective over g.ctl, at the start of a restore. When `restored`, this
  // rank's parameters and g.sync's optimizer state are the agreed step's;
  // the caller zeroes the extra strategy state and broadcasts the model's
  // buffers and the loss scaler from `source`. `committed_step`: the last
  // committed checkpoint's (-1: none).
  absl::StatusOr<MemoryRecovery> TryRestore(Generation& g, int64_t committed_step);

 private:
  uint32_t ParamsChecksum();
  bool Fits(Generation& g) const;
  absl::Status Receive(Generation& g, int source, bool keep);
  // The sharded path: TryRestore's `out` when the replicated one did not apply.
  absl::Status TryPeers(Generation& g, int64_t committed_step, MemoryRecovery* out);

  const bool enabled_;
  kernels::Backend* const backend_;
  nn::Model* const model_;
  bool live_ = false;
  int64_t reached_ = -1;        // the step this process trained to
  int64_t step_ = -1;           // the step the kept state belongs to (-1: none)
  int64_t epoch_ = 0, samples_in_epoch_ = 0;
  uint32_t checksum_ = 0;
  std::vector<std::vector<float>> optimizer_;  // the kept optimizer state, by buffer
  std::vector<float> host_;                    // device backends: parameter staging
  PeerReplica peers_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_MEMORY_STATE_H_
