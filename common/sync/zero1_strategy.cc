// Registers the `zero1` strategy (zero_sync.h, stage 1) with the registry:
// the optimizer covers this rank's ZeroShardMap shard.
#include <memory>
#include <utility>

#include "common/sync/registry.h"
#include "common/sync/zero_sync.h"

namespace tandem {
namespace sync {
namespace {

StrategyInfo Zero1Info() {
  StrategyInfo info;
  info.name = "zero1";
  info.summary =
      "ZeRO-1: bucketed gradient allreduce overlapped with backward; each rank keeps optimizer state for its 1/N slice, steps it, and the slices are allgathered";
  info.options = {{"bucket_cap_mb", "25", "MiB per gradient bucket and per allgather round"}};
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateFromRegistry(const SyncOptions& options,
                                                                 SyncEnv env) {
  ZeroSyncOptions o;
  o.stage = ZeroStage::kOptimizer;
  o.comm = env.comms->world.get();
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  o.make_optimizer = std::move(env.make_optimizer);
  o.make_device_stepper = std::move(env.make_device_stepper);
  absl::StatusOr<std::unique_ptr<ZeroSync>> s = CreateZeroSync(std::move(o));
  if (!s.ok()) return s.status();
  return std::unique_ptr<GradientSync>(std::move(*s));
}

TANDEM_REGISTER_SYNC_STRATEGY(Zero1Info(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
