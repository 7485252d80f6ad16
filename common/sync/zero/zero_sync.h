// ZeroSync: the ZeRO strategies `zero1` and `zero2` (ZeRO stages 1 and 2)
// for host memory. Parameters stay replicated: the flat vector keeps its
// full size on every rank and the model's full gradient buffer still exists
// (backward writes it). What is sharded is the update: rank r owns the
// contiguous real range ZeroShardMap(n, N).owned(r) (padded shards of
// S = ceil(n/N), padding at the end, documented in zero_shard_map.h), its
// optimizer holds state for that range only and steps it, and the updated
// slices are allgathered so every rank ends the step with the same full
// parameters.
//
//   stage 1 (zero1): buckets are allreduced in place while backward runs
//     (the DDP bucket engine, bucket_engine.h); each rank then clips and
//     steps its slice of the summed gradients.
//   stage 2 (zero2): each bucket is reduced to its owners while backward
//     runs and the result lands in a gradient-shard buffer of S floats:
//     the only reduced gradients this rank keeps. A bucket's pieces (its
//     intersection with each shard) are packed into N equal blocks and
//     reduce-scattered; when a bucket sits mostly in one shard that packing
//     would send up to N times the bucket, so such a bucket is allreduced in
//     place instead and the owner copies its piece (whichever moves fewer
//     bytes: reduce-scatter iff N * largest_piece <= 2 * bucket).
//
// Both then compute one clip factor over all shards (GradClip with the
// world communicator: the same float on every rank), step the owned slice
// (fp32, params + lo in place: the model's fp32 parameters are the master
// weights), and allgather the slices in chunks of about bucket_cap_mb / N
// per shard through fixed staging buffers. Nothing is allocated per step.
// Results equal the allreduce strategy's up to the order of float sums
// (tested within 1e-5 after K steps).
//
// Overlap (option overlap_allgather, with layer_ranges): instead of the
// allgather at the end of FinishStep, a gather thread runs the same rounds
// while the trainer thread goes on to the next batch and its forward.
// Round k is one ring allgather of floats [k C, (k + 1) C) of every shard
// (C = gather_group_mb / N: each collective large enough): every rank
// sends an equal part, so at every layout (one worker per node, unequal
// nodes) no link carries more than the ring's (N - 1) / N of the vector —
// gathering layer by layer instead would have each layer's one or two
// owners send it to everyone. The strategy is the model's parameter hook
// (param_hook(), tensor/param_hook.h): a layer's Gather waits only for the
// rounds that reach the end of its pieces in their shards, so the first
// layers of every shard arrive first and forward computes while later
// rounds arrive. Every other call (BeginStep, FinishStep, SyncStateToHost,
// StateLoaded) first waits for the gather to end, so the gradient
// collectives never share the communicator with it. The owned slice is
// final when FinishStep returns (checkpoints read only it). The wait the
// model sees is exposed comm time. On by default (overlap=1).
//
// Gather rounds (both overlap modes) take the route of RoundGatherRoute
// (layer_gather.h, LayerGather's rule: fewest bytes on the busiest link):
// the ring allgather above, or, given node groups with equal nodes of
// several ranks (L each, M nodes), the two-level allgather
// (two_level_allgather.h: every rank's C floats once to the same local rank
// of every other node, then through shm inside each node; two collectives
// per round): (M - 1) L C floats on a node's link instead of the ring's
// (N - 1) C (2x2: 2 C instead of 3 C). One rank per node, unequal nodes,
// one node, or no groups: the ring.
//
// One node (the world a ShmCommunicator, host memory): the shared-memory
// allreduce's two halves with the step in between (one_node_pieces.h).
// Each zero2 bucket is reduce-scattered to the owners of its pieces where
// they lie (no packing), and zero1/zero2 gather the updated slices in one
// collective at the end of FinishStep, without staging; overlap_allgather
// does not apply there (rank 0 logs it). Same bytes through the segment and
// the same rank-order sums as the allreduce: bit for bit its parameters.
//
// Memory per rank (memory()): parameters n floats (replicated); reduced
// gradients n floats (zero1, in the model's buffer) or S floats (zero2;
// backward's own n-float buffer is the model's and is not counted);
// optimizer state k * owned floats (k buffers: AdamW 2, SGD with momentum
// 1); staging: one allgather round (about a bucket; with
// overlap_allgather about gather_group_mb) plus, for zero2, at most 2
// buckets for the packed reduce-scatter.
//
// Thread-safety, ownership and failure as allreduce_sync.h: the
// communicator, params and grads are borrowed and must outlive this object;
// a failed collective makes FinishStep return it (naming the bucket or the
// allgather chunk, the step and the rank) and every later call
// FailedPrecondition. A failed gradient collective leaves the parameters
// untouched; a failed parameter allgather comes after this rank stepped its
// shard, so the ranks then differ: the generation is over and must restore
// (the worker's Checkpointer re-broadcasts parameters and optimizer state).
//
// Device memory (a make_device_stepper that builds a stepper, e.g. CUDA
// with NCCL as `comm`): zero1 AND zero2 take one path. Each bucket is
// allreduced in place over `comm` while backward runs (zero2 on device is
// zero1's path: no reduce-scatter, gradient memory is not reduced); the
// norm is the stepper's SumOfSquares of the owned slice, combined across
// ranks over `host_comm`; the stepper (over the owned range's optimizer:
// state is 1/N) steps params + lo; the slices are gathered in place
// (GatherOwnedSlices in zero_parts.h: one allgather when N divides n,
// else one broadcast per owner; no staging). overlap_allgather is host
// only: ignored on device (rank 0 logs it). SyncStateToHost / StateLoaded
// call the stepper's SaveState / LoadState.
#ifndef TANDEM_COMMON_SYNC_ZERO_ZERO_SYNC_H_
#define TANDEM_COMMON_SYNC_ZERO_ZERO_SYNC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/communicator.h"
#include "common/comm/groups.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"
#include "common/shard/zero_shard_map.h"
#include "common/sync/gradient_sync.h"
#include "common/sync/registry.h"

namespace tandem {
namespace sync {

enum class ZeroStage { kOptimizer = 1, kGradients = 2 };

struct ZeroSyncOptions {
  ZeroStage stage = ZeroStage::kOptimizer;
  Communicator* comm = nullptr;  // borrowed; host memory (Gloo, shm)
  float* params = nullptr;       // flat parameters [0, size), replicated
  float* grads = nullptr;        // flat gradients (backward's buffer)
  int64_t size = 0;
  // The ranges backward reports, in backward order (nn::GroupRanges).
  std::vector<std::pair<int64_t, int64_t>> ready_ranges;
  double bucket_cap_mb = 25;     // MiB per gradient bucket and allgather round, > 0
  double max_grad_norm = 0;      // global L2 clip over all shards; 0 = off
  // The model's parameter-hook ranges in forward order, tiling [0, size)
  // (Model::param_hook_ranges()); needed for overlap_allgather.
  std::vector<std::pair<int64_t, int64_t>> layer_ranges;
  // Gather the updated slices during the next forward (see above) instead
  // of at the end of FinishStep. Ignored (end of FinishStep) without
  // layer_ranges or with one rank.
  bool overlap_allgather = false;
  // overlap_allgather: MiB per gather round over all shards (> 0).
  double gather_group_mb = 1;
  // The generation's node groups (borrowed; may be null: flat rounds). With
  // nodes of equal size and several ranks each, every round goes in two
  // levels (see "Gather rounds" above).
  const CommGroups* groups = nullptr;
  // Called once with this rank's owned range (ZeroShardMap::owned(rank)).
  std::function<absl::StatusOr<std::unique_ptr<optim::Optimizer>>(optim::ParamRange)>
      make_optimizer;
  // Device backends: a factory that returns a stepper selects the device
  // path (above); one that returns null (host memory) the host path.
  optim::DeviceStepperFactory make_device_stepper;
  // Device path only (borrowed; may be null): a host-memory communicator
  // over the same ranks for the gradient norm; required when
  // max_grad_norm > 0 with more than one rank (else InvalidArgument).
  Communicator* host_comm = nullptr;
};

// Bytes this rank holds, by kind (see the file comment).
using ZeroMemory = SyncMemory;

class ZeroSync : public GradientSync {
 public:
  virtual const shard::ZeroShardMap& shard_map() const = 0;
};

// InvalidArgument for bad options (naming the field); the optimizer
// factory's error.
absl::StatusOr<std::unique_ptr<ZeroSync>> CreateZeroSync(ZeroSyncOptions options);

// The --sync_opt keys zero1 and zero2 share (bucket_cap_mb, overlap) and
// their check (overlap must be 0 or 1).
std::vector<OptionInfo> ZeroOptionInfo();
absl::Status ValidateZeroOptions(const SyncOptions& options);
// The gather rounds go in two levels when the node groups are there
// (StrategyInfo::uses_node_groups): always true.
bool ZeroUsesNodeGroups(const SyncOptions& options);

// The registry's factory for `stage` (zero1_strategy.cc, zero2_strategy.cc).
absl::StatusOr<std::unique_ptr<GradientSync>> CreateZeroSyncForRegistry(
    ZeroStage stage, const SyncOptions& options, SyncEnv env);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ZERO_ZERO_SYNC_H_
