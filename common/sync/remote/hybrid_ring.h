// HybridRing: the part of `--sync hybrid`'s vector that goes by a
// cross-node ring instead of through the shard servers (--sync_opt
// ring_share, hybrid_split.h): the prefix [0, size()) of the flat vector.
// Its gradients are summed over every rank the way `allreduce` sums them
// (`hier=1`'s pieces, hier_allreduce.h: node reduce-scatter, an allreduce
// of each local rank's share among the nodes, node allgather; with one rank
// per node, or nodes of different sizes, the world's flat ring), and the
// worker steps them with the trainer's optimizer exactly as allreduce does
// (grad_scale x StepOptions' scale / world, the same Optimizer::Step), so
// every rank holds the same parameters and optimizer state.
//
// Checkpoints see one optimizer over the whole vector (whole(): an
// OptimizerMirror, materialised only around a checkpoint or a restore):
// FillForCheckpoint puts this part's state at [0, size()) and the servers'
// (their mirror, over the rest) behind it; Loaded takes a restored whole
// state apart again (this part into the local optimizer on every rank, the
// rest into the servers' mirror on rank 0, which sends it with InitServers).
//
//   ASSIGN_OR_RETURN(auto ring, HybridRing::Create(env, ring_size));
//   RETURN_IF_ERROR(ring->Reduce());                        // comm thread
//   RETURN_IF_ERROR(ring->Step(ctx, options_grad_scale));   // FinishStep
//
// Not thread-safe: Reduce runs on the strategy's communication thread, the
// rest on the trainer thread, never at once (the strategy drains between).
// Borrows the env's groups and vectors; owns its optimizer and staging
// (allocated in Create; Reduce and Step allocate nothing). Failures are
// the collective's or the optimizer's status with the phase in front.
#ifndef TANDEM_COMMON_SYNC_REMOTE_HYBRID_RING_H_
#define TANDEM_COMMON_SYNC_REMOTE_HYBRID_RING_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"
#include "common/sync/allreduce/hier_allreduce.h"
#include "common/sync/registry.h"
#include "common/sync/remote/optimizer_mirror.h"

namespace tandem {
namespace sync {

class HybridRing {
 public:
  // env: the whole vector (params, grads, size), the groups, make_optimizer.
  static absl::StatusOr<std::unique_ptr<HybridRing>> Create(const SyncEnv& env, int64_t size);
  HybridRing(const HybridRing&) = delete;
  HybridRing& operator=(const HybridRing&) = delete;

  int64_t size() const { return size_; }
  // "hier" (node reduce-scatter, ring among the nodes, node allgather) or
  // "flat" (the world's ring).
  const char* scheme() const { return hier_ != nullptr ? "hier" : "flat"; }

  // grads[0, size()) becomes the sum over every rank (collective over the
  // world, or the intra and inter groups).
  absl::Status Reduce();
  // params[0, size()) stepped with the summed gradients averaged over the
  // world: ctx as FinishStep got it, step_scale = StepOptions::grad_scale.
  absl::Status Step(const optim::StepContext& ctx, float step_scale);

  // The optimizer the checkpointer sees, over the whole vector.
  optim::Optimizer* whole() { return whole_.get(); }
  // Rank 0, before a checkpoint: whole() = this part's state, then the
  // servers' mirror (already fetched) behind it.
  void FillForCheckpoint(OptimizerMirror* servers);
  // After a restore (every rank's whole() holds the checkpoint's state):
  // this part into the local optimizer; rank 0 also the rest into the
  // servers' mirror. whole() is released.
  void Loaded(int rank, OptimizerMirror* servers);
  // The checkpoint that needed whole() is written.
  void Release() { whole_->Release(); }

  int64_t optimizer_bytes() const;
  int64_t staging_bytes() const { return hier_ != nullptr ? hier_->staging_bytes() : 0; }
  // Bytes this rank sent to other nodes for the ring so far (an estimate:
  // a ring allreduce sends 2 (N - 1) / N of its data).
  int64_t inter_node_bytes() const { return inter_node_bytes_; }

 private:
  HybridRing(const SyncEnv& env, int64_t size, std::unique_ptr<optim::Optimizer> optimizer,
             std::unique_ptr<OptimizerMirror> whole, std::unique_ptr<HierAllreduce> hier);

  Communicator* const world_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const int nodes_;
  const std::unique_ptr<optim::Optimizer> optimizer_;  // over [0, size_)
  const std::unique_ptr<OptimizerMirror> whole_;       // over the whole vector
  const std::unique_ptr<HierAllreduce> hier_;          // null: the world's ring
  int64_t inter_node_bytes_ = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_HYBRID_RING_H_
