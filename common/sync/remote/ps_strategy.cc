// Registers the `ps` strategy (ps_sync.h): shard servers step, workers push
// gradients and pull parameters.
#include "common/sync/registry.h"
#include "common/sync/remote/ps_sync.h"

namespace tandem {
namespace sync {
namespace {

StrategyInfo PsInfo() {
  StrategyInfo info;
  info.name = "ps";
  info.summary =
      "parameter servers: gradient chunks pushed to shard servers while backward runs; the "
      "servers hold the master weights and optimizer state, step, and workers pull the "
      "parameters back (needs --shard_servers)";
  info.options = RemoteSyncOptionInfo();
  info.clips = false;  // the global norm would live on the shard servers
  info.validate = ValidateRemoteSyncOptions;
  return info;
}

TANDEM_REGISTER_SYNC_STRATEGY(PsInfo(), CreatePsSync);

}  // namespace
}  // namespace sync
}  // namespace tandem
