// Registers the `zero2` strategy (zero_sync.h, stage 2) with the registry:
// the optimizer covers this rank's ZeroShardMap shard.
#include <memory>
#include <utility>

#include "common/sync/registry.h"
#include "common/sync/zero/zero_sync.h"

namespace tandem {
namespace sync {
namespace {

StrategyInfo Zero2Info() {
  StrategyInfo info;
  info.name = "zero2";
  info.summary =
      "ZeRO-2: gradient buckets reduced to their owners' 1/N shards while backward runs; sharded optimizer state and step; the slices are allgathered";
  info.options = ZeroOptionInfo();
  info.validate = ValidateZeroOptions;
  info.uses_node_groups = ZeroUsesNodeGroups;
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateFromRegistry(const SyncOptions& options,
                                                                 SyncEnv env) {
  return CreateZeroSyncForRegistry(ZeroStage::kGradients, options, std::move(env));
}

TANDEM_REGISTER_SYNC_STRATEGY(Zero2Info(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
