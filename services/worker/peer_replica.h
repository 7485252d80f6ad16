// PeerReplica: in-memory replicas of sharded training state, so a lost
// worker's shard is rebuilt from a peer's memory instead of the disk
// (issue 34 item 1, sharded strategies: zero1, zero2, zero3).
//
// Every K steps (--replica_every, default 5; 0 turns it off) each rank
// copies its shard — the parameters of its owned range (zero1/2: the fp32
// master slice, which is the model's own; zero3: its parameter shard) and
// every optimizer state buffer over that range — into a host snapshot and
// sends a copy to its ring neighbour (rank r -> r + 1 mod W) in the
// background over a PeerLink (peer_link.h); the step goes on at once. It
// keeps its own snapshots of the last two replica steps (the neighbour may
// still be receiving the newer one when a fault comes) and the last copy
// it received whole from rank r - 1. Strategy state other than the
// optimizer's is not kept: zero strategies have none. At a generation's
// end, peer_restore.h agrees on a step every old rank's shard is held at
// and rebuilds the state from these copies.
//
//   PeerReplica replica(options, backend, model);
//   // after every applied step, on the trainer thread (collective at the
//   // first snapshot of a generation: the link's addresses):
//   RETURN_IF_ERROR(replica.MaybeSnapshot(g, step, epoch, samples_in_epoch));
//
// Memory per rank: 4 x (1 + k) x n / W floats for k optimizer buffers (two
// own snapshots, the neighbour's copy and the one being received): SGD with
// momentum at W = 3 is 8/3 n floats, about 2.7x the model's fp32 size
// (bytes(); the gauge tandem_replica_bytes). Allocated at the first
// snapshot of a generation's shard size and reused: nothing per step.
//
// Thread-safety: every method but the PeerSink ones from the trainer
// thread; the sink is the link's receive thread (held copies are guarded).
// Borrows backend and model. Failure: MaybeSnapshot returns the strategy's
// SyncStateToHost error or the link's start error (membership problems);
// a send that fails is a warning and a lost replica, never an error, and a
// send still in flight at the next replica step (a stalled neighbour)
// skips that step's replica instead of making the step wait.
#ifndef TANDEM_SERVICES_WORKER_PEER_REPLICA_H_
#define TANDEM_SERVICES_WORKER_PEER_REPLICA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "services/worker/generation.h"
#include "services/worker/peer_link.h"

namespace tandem {
namespace worker {

// What one snapshot is of: the generation and rank it was taken in, the
// step, the data position after it and the owned range.
struct ReplicaMeta {
  int64_t generation = -1;  // -1: empty
  int64_t rank = -1;
  int64_t world = 0;
  int64_t step = -1;
  int64_t epoch = 0;
  int64_t samples_in_epoch = 0;
  int64_t lo = 0, hi = 0;
};
static_assert(sizeof(ReplicaMeta) == kPeerFrameHeaderBytes, "one frame header");

// A shard's state: params[lo, hi) then each optimizer buffer over it.
struct ReplicaSlot {
  ReplicaMeta meta;
  std::vector<float> data;
  bool valid() const { return meta.generation >= 0; }
};

struct PeerReplicaOptions {
  int every = 5;          // K: a replica every K steps; 0 = off
  // Tests: the replica step waits for the neighbour's acknowledgement, so
  // which steps are held does not depend on thread scheduling (a fault
  // injected 2 steps after a replica step finds it held). Off in real runs.
  bool synchronous = false;
  PeerLinkOptions link;
};

class PeerReplica : public PeerSink {
 public:
  PeerReplica(const PeerReplicaOptions& options, kernels::Backend* backend, nn::Model* model)
      : o_(options), backend_(backend), model_(model) {}
  ~PeerReplica() override { StopLink(); }

  // The strategy shards its optimizer state over more than one rank and
  // keeps it in this process (zero1/2/3 at W > 1; not ps / hybrid).
  static bool Sharded(Generation& g, int64_t total_params);

  // After an applied step: at every K-th step of a sharded strategy,
  // snapshots this rank's shard and starts sending it to the next rank.
  absl::Status MaybeSnapshot(Generation& g, int64_t step, int64_t epoch, int64_t samples_in_epoch);

  // Ends the background transfers (before a restore reads the copies).
  void StopLink();
  // Forgets every snapshot and copy (the state was restored from disk:
  // they belong to another trajectory).
  void Clear();
  // Forgets those of steps after `step` (restored at `step` from memory).
  void DropAfter(int64_t step);

  // The own snapshots and the held copy (after StopLink).
  const ReplicaSlot& own(int i) const { return own_[i]; }
  const ReplicaSlot& held() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return held_; }
  // Host memory the replicas hold (all four buffers' capacity).
  int64_t bytes() const;
  int every() const { return o_.every; }

  // PeerSink (the link's receive thread).
  char* Begin(const PeerFrameHeader& header, uint64_t bytes) override;
  void Complete(bool ok) override;

 private:
  const PeerReplicaOptions o_;
  kernels::Backend* const backend_;
  nn::Model* const model_;
  std::unique_ptr<PeerLink> link_;
  int64_t link_generation_ = -1;
  bool sending_ = false;
  ReplicaSlot own_[2];
  int next_ = 0;  // the own slot the next snapshot overwrites
  mutable absl::Mutex mu_;
  ReplicaSlot held_ ABSL_GUARDED_BY(mu_);      // the neighbour's last whole copy
  ReplicaSlot incoming_ ABSL_GUARDED_BY(mu_);  // being received
  ReplicaMeta pending_meta_ ABSL_GUARDED_BY(mu_);  // what incoming_ will be of
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_PEER_REPLICA_H_
