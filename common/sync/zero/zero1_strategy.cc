// Registers the `zero1` strategy (zero_sync.h, stage 1) with the registry:
// the optimizer covers this rank's ZeroShardMap shard.
#include <memory>
#include <utility>

#include "common/sync/registry.h"
#include "common/sync/zero/zero_sync.h"

namespace tandem {
namespace sync {
namespace {

StrategyInfo Zero1Info() {
  StrategyInfo info;
  info.name = "zero1";
  info.summary =
      "ZeRO-1: bucketed gradient allreduce overlapped with backward; each rank keeps optimizer state for its 1/N slice, steps it, and the slices are allgathered";
  info.options = ZeroOptionInfo();
  info.validate = ValidateZeroOptions;
  info.uses_node_groups = ZeroUsesNodeGroups;
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateFromRegistry(const SyncOptions& options,
                                                                 SyncEnv env) {
  return CreateZeroSyncForRegistry(ZeroStage::kOptimizer, options, std::move(env));
}

TANDEM_REGISTER_SYNC_STRATEGY(Zero1Info(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
