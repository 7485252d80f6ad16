// RestoreFromPeers: the survivors of a generation rebuild sharded training
// state (zero1/2/3) from the peer replicas they hold (peer_replica.h),
// resharded to the new world, instead of reloading the disk checkpoint
// (issue 34 item 1).
//
// One all-gather over the new control mesh: what every rank holds (its two
// own snapshots and the copy of its ring predecessor's, each tagged with
// the generation, old rank and step it was taken at) and the step it had
// reached. Every rank then decides the same thing: in the newest
// generation any snapshot is of, the newest step R at which *every* old
// rank's shard is held by some survivor (its own snapshot, or the copy its
// successor received). The lowest new rank holding each shard broadcasts
// it, old rank by old rank: its parameter slice lands in every rank's flat
// vector (zero1/2 keep it whole; zero3's StateLoaded then keeps the owned
// part), and each rank keeps the part of each optimizer buffer that falls
// in its new owned range — the same resharding the disk restore does
// (Checkpointer::ReshardOptimizerState), from memory. The data position
// is R's, so the steps after R are redone (at most K).
//
// When memory cannot serve, nothing is overwritten and `reason` says why:
// no replica yet, a shard with no copy (a worker and the neighbour that
// held its replica both lost), a committed checkpoint newer than R, an
// optimizer that does not match, a model with registered buffers (their
// values at R are not kept). The caller then restores from disk.
//
// Thread-compatible (the trainer thread); collective over g.ctl. Failure:
// the communicator's error (a membership problem: re-join; the replicas
// are left as they were).
#ifndef TANDEM_SERVICES_WORKER_PEER_RESTORE_H_
#define TANDEM_SERVICES_WORKER_PEER_RESTORE_H_

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

struct PeerRecovery {
  bool restored = false;
  int64_t step = -1;            // R
  int64_t epoch = 0;
  int64_t samples_in_epoch = 0;
  int source = 0;               // the new rank that sent old rank 0's shard
  int shards = 0;               // old ranks' shards rebuilt
  int sent_by_neighbours = 0;   // of those, from a neighbour's copy
  std::string reason;           // when not restored and there was work to redo
};

// What one rank holds, as the all-gather carries it: its own snapshots
// (slots 0, 1) and its predecessor's copy (slot 2); `fits`: its
// optimizer has the snapshots' buffer count and it has no model buffers.
struct ReplicaOffer {
  ReplicaMeta slot[3];
  int64_t fits = 0;
};

// The decision every rank computes from all offers (pure: unit-tested).
struct PeerRestorePlan {
  int64_t step = -1;         // R; -1: memory cannot serve (see reason)
  int64_t generation = -1;   // the generation the shards are of
  std::vector<int> source;   // per old rank: the new rank that sends it
  std::vector<int> slot;     // per old rank: which of the source's slots
  std::string reason;
};
PeerRestorePlan PlanPeerRestore(const std::vector<ReplicaOffer>& offers, int64_t committed_step);

// Collective. `committed_step`: the last committed checkpoint's (-1: none).
absl::StatusOr<PeerRecovery> RestoreFromPeers(Generation& g, PeerReplica& replica,
                                              kernels::Backend* backend, nn::Model* model,
                                              int64_t committed_step);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_PEER_RESTORE_H_
