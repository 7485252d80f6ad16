// Registers the `hybrid` strategy (hybrid_sync.h): reduce-scatter inside
// the node, each local rank's slice through the shard servers, allgather
// inside the node.
#include "common/sync/registry.h"
#include "common/sync/remote/hybrid_sync.h"
#include "common/sync/remote/shard_server_state.h"

namespace tandem {
namespace sync {
namespace {

StrategyInfo HybridInfo() {
  StrategyInfo info;
  info.name = "hybrid";
  info.summary =
      "node reduce-scatter, each local rank's 1/K slice pushed to the shard servers (which "
      "step) and pulled back, node allgather (needs --shard_servers)";
  info.options = HybridSyncOptionInfo();
  info.needs_node_groups = true;
  info.clips = false;  // the global norm would live on the shard servers
  info.validate = ValidateHybridSyncOptions;
  return info;
}

TANDEM_REGISTER_SYNC_STRATEGY(HybridInfo(), CreateHybridSync);

}  // namespace
}  // namespace sync
}  // namespace tandem
