// Zero3Sync: the `zero3` strategy (ZeRO stage 3, FSDP-style) for host
// memory. Parameters are partitioned like the optimizer state and the
// reduced gradients (zero_sync.h): rank r owns the contiguous real range
// ZeroShardMap(n, N).owned(r) of the flat vector, keeps its fp32 master
// values there (in the model's own buffer, params + owned.lo), the
// optimizer state for it and an S-float shard of the reduced gradients.
// The rest of the model's n-float parameter buffer is only address space:
// each layer's range is materialised when the model asks for it through
// the parameter hook (tensor/param_hook.h) and returned to the OS after.
//
// Layers are gathered in groups (layer_groups.h): consecutive layers share
// one collective until the group holds at least group_mb (default 4 MiB;
// 0 = every layer alone). On one node (groups say so) every layer is
// gathered alone whatever group_mb says: there is no network link, and
// groups of mlp:784,1024,1024,10 measured slower per step there (4 workers
// on a 2-core host: one whole-model group 2-4x over the owners' shm
// broadcasts; a two-group split 0.6x -> ~1x allreduce's step over the shm
// pieces, so not the collective; cause not established). Over shm each
// layer is one collective of the owners' pieces where they lie, and each
// gradient bucket is reduced to its owners the same way
// (one_node_pieces.h).
//
//   Gather(lo, hi, pass)   the group of layer [lo, hi) comes from the owners
//                          of its pieces into params on every rank by one
//                          ring collective (layer_gather.h: a packed
//                          allgather in rounds of gather_mb of staging, or
//                          an allreduce with the non-owned part zeroed, or
//                          at equal nodes two-level collectives), unless it
//                          is held already; then the next group is
//                          prefetched — the next in forward order during
//                          forward, the previous one during backward — on
//                          the communication thread while this one computes.
//   Release(lo, hi, pass)  after a group's last layer in the pass (its
//                          first in backward) the group's pages wholly
//                          outside the owned range are given back to the OS
//                          (see PageRelease: lazily by default). The last
//                          group of forward is kept for the first layers of
//                          backward (released by the next Gather of another
//                          group), so at most two groups are held besides
//                          the shard.
//
// Gradients: backward still writes the model's full n-float gradient
// buffer; each bucket (bucket_plan.h, bucket_cap_mb) is reduced to its
// owners as soon as backward reports it (zero2's reduce-scatter / allreduce
// routing) and its pages are then released too. FinishStep waits for every
// collective, checks and clips over all shards (CheckGradients: non-finite
// skip, measured norm, one clip factor identical on every rank) and steps
// the owned slice. There is no parameter allgather: the next forward
// gathers what it uses. Results equal allreduce's within float summation
// order (tested within 1e-5).
//
// Collectives of both kinds run on ONE communication thread, in the order
// the trainer thread asked for them (Gather / prefetch / OnGradientsReady
// calls are program order, identical on every rank), so they match across
// ranks. Nothing is allocated per step: the op queue, bucket bookkeeping
// and the zero2 staging buffers are sized at creation.
//
// Ranges the hook is called with should be `layer_ranges` (the model's
// param_hook_ranges()); any other range (Gather(0, n) to see the whole
// vector, e.g. for a test or an export) is gathered synchronously without
// prefetch and must be released by the caller with Release(0, n, ...).
//
// Memory (memory()): param_bytes = the owned slice plus the most non-owned
// parameter bytes held at once since the last BeforeForward; grad_bytes =
// the S-float shard; optimizer_bytes as zero1/2; staging = the zero2
// reduce-scatter buffers. resident_param_bytes() measures with mincore.
// stats(): buckets counts every collective (layer gathers and gradient
// buckets); exposed_wait_seconds is the time the trainer thread waited for
// them (inside Forward/Backward for gathers, in FinishStep for the rest).
//
// Checkpoints need nothing special: owned_range() holds the master values
// in the model's buffer, so the worker's Checkpointer writes the same shard
// files and manifest as zero1/2; after a restore has written the whole
// vector, StateLoaded() releases everything but the owned slice.
//
// Thread-safety: as gradient_sync.h; Gather/Release are called from the
// thread running the model (the trainer thread). Borrowed: communicator,
// params, grads (must outlive this object and must not be used by others
// while it runs). Failure: a failed collective makes the Gather that waits
// for it (so the model's Forward/Backward) or FinishStep return it, naming
// the layer range or bucket, the step and the rank; every later call is
// FailedPrecondition. Device memory: UNIMPLEMENTED (CPU backend only).
#ifndef TANDEM_COMMON_SYNC_ZERO_ZERO3_SYNC_H_
#define TANDEM_COMMON_SYNC_ZERO_ZERO3_SYNC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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
#include "common/tensor/param_hook.h"

namespace tandem {
namespace sync {

// How released parameter and gradient pages go back to the OS. Their
// contents are never read again before being rewritten (a gather or
// backward overwrites them), so any of the three is correct:
//   kLazy  madvise(MADV_FREE): the kernel takes the pages when it needs
//          memory; until then re-use costs nothing (RSS counts them as
//          LazyFree). The default: with kNow every gather re-faults and
//          zero-fills its pages (steps 2.3-3.3x slower measured on one
//          4-rank node, docs/user-guide.md).
//   kNow   madvise(MADV_DONTNEED): resident memory drops at once (what a
//          job sharing a host with strict RSS limits wants).
//   kKeep  nothing returned; only the accounting (memory()) changes.
enum class PageRelease { kLazy, kNow, kKeep };

// "lazy" | "now" | "keep" (the --sync_opt release values); InvalidArgument
// naming the choices otherwise.
absl::StatusOr<PageRelease> ParsePageRelease(const std::string& value);

// zero3's default group_mb: each gather collective at least 4 MiB (about
// 34 ms at 1 Gbit/s), so per-collective hand-offs stay small and a group
// spans several shards.
inline constexpr double kDefaultGroupMb = 4;

struct Zero3SyncOptions {
  Communicator* comm = nullptr;  // borrowed; host memory (Gloo, shm)
  float* params = nullptr;       // the model's flat parameters [0, size)
  float* grads = nullptr;        // the model's flat gradients
  int64_t size = 0;
  // The ranges backward reports, in backward order (nn::GroupRanges).
  std::vector<std::pair<int64_t, int64_t>> ready_ranges;
  // The ranges the model's hook gathers, in forward order
  // (Model::param_hook_ranges()); empty = no prefetch (every Gather waits).
  std::vector<std::pair<int64_t, int64_t>> layer_ranges;
  double bucket_cap_mb = 25;  // MiB per gradient bucket, > 0
  // Consecutive layers (address-contiguous, forward order) share one
  // gather until the group holds >= group_mb MiB (layer_groups.h); 0 =
  // every layer alone. Bigger: fewer, better balanced collectives, more
  // parameters held at once (two groups).
  double group_mb = kDefaultGroupMb;
  // MiB of staging per allgather round (a group whose owners' pieces are
  // gathered by the packed allgather goes in rounds of gather_mb / N per
  // piece); > 0.
  double gather_mb = 1;
  double max_grad_norm = 0;   // global L2 clip over all shards; 0 = off
  // What Release does with the host pages it frees (see PageRelease).
  PageRelease release = PageRelease::kLazy;
  // The generation's node groups (borrowed; may be null): with equal nodes
  // a layer may be gathered in two levels (layer_gather.h).
  const CommGroups* groups = nullptr;
  std::function<absl::StatusOr<std::unique_ptr<optim::Optimizer>>(optim::ParamRange)>
      make_optimizer;
  optim::DeviceStepperFactory make_device_stepper;  // one that builds a stepper: UNIMPLEMENTED
};

class Zero3Sync : public GradientSync, public tensor::ParamHook {
 public:
  virtual const shard::ZeroShardMap& shard_map() const = 0;
  // Non-owned parameter floats materialised now / at most since the last
  // BeforeForward.
  virtual int64_t held_param_floats() const = 0;
  virtual int64_t peak_held_param_floats() const = 0;
  // Bytes of the model's parameter buffer resident in RAM now (mincore);
  // -1 when it cannot be measured.
  virtual int64_t resident_param_bytes() const = 0;
};

// OK, or InvalidArgument naming the bad one of group_mb (>= 0) and
// gather_mb (> 0), both at most 1e6.
absl::Status CheckZero3GroupOptions(double group_mb, double gather_mb);

// InvalidArgument for bad options (naming the field), the optimizer
// factory's error, Unimplemented for device memory.
absl::StatusOr<std::unique_ptr<Zero3Sync>> CreateZero3Sync(Zero3SyncOptions options);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ZERO_ZERO3_SYNC_H_
