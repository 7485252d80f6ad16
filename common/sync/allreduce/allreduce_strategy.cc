// Registers the `allreduce` strategy (allreduce_sync.h) with the registry:
// the whole vector is owned, so the optimizer covers [0, size). --sync_opt
// hier=1 selects the hierarchical per-bucket allreduce (hier_allreduce.h)
// and makes NeedsNodeGroups true.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/sync/registry.h"

namespace tandem {
namespace sync {
namespace {

StrategyInfo AllreduceInfo() {
  StrategyInfo info;
  info.name = "allreduce";
  info.summary =
      "DDP: bucketed allreduce overlapped with backward, then average, clip and the optimizer "
      "over the whole vector on every rank";
  info.options = {{"bucket_cap_mb", "25", "MiB per gradient bucket"},
                  {"hier", "0",
                   "1 = hierarchical allreduce (intra-node reduce-scatter, inter-node allreduce, "
                   "intra-node allgather), 0 = flat ring"}};
  info.validate = [](const SyncOptions& o) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t hier, GetSyncOptInt(o, "hier", 0));
    if (hier != 0 && hier != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("hier must be 0 (flat ring allreduce) or 1 (hierarchical allreduce), got ",
                       hier));
    }
    return absl::OkStatus();
  };
  // hier=1 needs the intra-node and inter-node groups; flat only the world.
  info.wants_node_groups = [](const SyncOptions& o) {
    absl::StatusOr<int64_t> hier = GetSyncOptInt(o, "hier", 0);
    return hier.ok() && *hier == 1;
  };
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateFromRegistry(const SyncOptions& options,
                                                                 SyncEnv env) {
  AllreduceSyncOptions o;
  o.comm = env.comms->world.get();
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  ASSIGN_OR_RETURN(const int64_t hier, GetSyncOptInt(options, "hier", 0));
  o.groups = env.comms;
  o.hierarchical = hier == 1;
  ASSIGN_OR_RETURN(o.optimizer, env.make_optimizer(optim::ParamRange{0, env.size}));
  o.make_device_stepper = std::move(env.make_device_stepper);
  return CreateAllreduceSync(std::move(o));
}

TANDEM_REGISTER_SYNC_STRATEGY(AllreduceInfo(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
