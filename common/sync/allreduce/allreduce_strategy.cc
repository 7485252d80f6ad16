// Registers the `allreduce` strategy (allreduce_sync.h) with the registry:
// the whole vector is owned, so the optimizer covers [0, size). --sync_opt
// hier=1 selects the hierarchical per-bucket allreduce (hier_allreduce.h)
// and makes NeedsNodeGroups true. --sync_opt wire=fp16|bf16 is the fair
// half-precision baseline: buckets travel as fp16 / bf16 and are summed in
// fp32, the result back in fp32. That is exactly the compressed strategy's
// dense exchange (compressed_sync.h) with codec=fp16|bf16 and no error
// feedback (every rank's slice decoded and summed in fp32 by its owner,
// re-encoded once, allgathered: a ring's bytes, never re-rounded hop by
// hop), so it is built from that rather than copied.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/sync/registry.h"

namespace tandem {
namespace sync {
namespace {

std::string Wire(const SyncOptions& o) {
  auto it = o.opts.find("wire");
  return it == o.opts.end() ? "fp32" : it->second;
}

// wire=fp16|bf16: the registered `compressed` strategy with that codec,
// no error feedback and no warm-up (its own header line follows this one).
// Found through the registry, not linked from here (compressed builds on
// allreduce's hierarchical parts): a binary links both through
// //common/sync/strategies, and one without compressed gets the registry's
// "unknown strategy" error, annotated with wire=.
absl::StatusOr<std::unique_ptr<GradientSync>> CreateHalfWire(const std::string& wire,
                                                             bool hierarchical,
                                                             const SyncOptions& options,
                                                             SyncEnv env) {
  SyncOptions c = options;
  c.strategy = "compressed";
  c.opts = {{"codec", wire}, {"ef", "0"}, {"warmup_steps", "0"}, {"hier", hierarchical ? "1" : "0"}};
  if (env.comms->world->rank() == 0) {
    LOG(INFO) << "allreduce: wire=" << wire << " (buckets sent as " << wire
              << ", summed in fp32, result in fp32)";
  }
  absl::StatusOr<std::unique_ptr<GradientSync>> sync = CreateGradientSync(c, std::move(env));
  if (!sync.ok()) return Annotate(sync.status(), absl::StrCat("allreduce wire=", wire));
  return sync;
}

StrategyInfo AllreduceInfo() {
  StrategyInfo info;
  info.name = "allreduce";
  info.summary =
      "DDP: bucketed allreduce overlapped with backward, then average, clip and the optimizer "
      "over the whole vector on every rank";
  info.options = {{"bucket_cap_mb", "25", "MiB per gradient bucket"},
                  {"hier", "0",
                   "1 = hierarchical allreduce (intra-node reduce-scatter, inter-node allreduce, "
                   "intra-node allgather), 0 = flat ring"},
                  {"step_per_bucket", "1",
                   "1 = step each bucket's parameters right after its allreduce when the step "
                   "allows it (no clipping, no non-finite skip, host memory), 0 = the whole "
                   "vector after the last bucket"},
                  {"wire", "fp32",
                   "fp32 | fp16 | bf16: buckets on the wire in this precision, summed in fp32, "
                   "the result back in fp32 (half the bytes of fp32; host memory only)"}};
  info.validate = [](const SyncOptions& o) -> absl::Status {
    const std::string wire = Wire(o);
    if (wire != "fp32" && wire != "fp16" && wire != "bf16") {
      return absl::InvalidArgumentError(
          absl::StrCat("wire must be fp32, fp16 or bf16, got '", wire, "'"));
    }
    ASSIGN_OR_RETURN(int64_t hier, GetSyncOptInt(o, "hier", 0));
    if (hier != 0 && hier != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("hier must be 0 (flat ring allreduce) or 1 (hierarchical allreduce), got ",
                       hier));
    }
    ASSIGN_OR_RETURN(int64_t per_bucket, GetSyncOptInt(o, "step_per_bucket", 1));
    if (per_bucket != 0 && per_bucket != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step_per_bucket must be 0 (step after the last bucket) or 1 (step each bucket after its "
          "allreduce), got ",
          per_bucket));
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
  ASSIGN_OR_RETURN(const int64_t hier, GetSyncOptInt(options, "hier", 0));
  const std::string wire = Wire(options);
  if (wire != "fp32") return CreateHalfWire(wire, hier == 1, options, std::move(env));
  AllreduceSyncOptions o;
  o.comm = env.comms->world.get();
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  o.groups = env.comms;
  o.hierarchical = hier == 1;
  ASSIGN_OR_RETURN(const int64_t per_bucket, GetSyncOptInt(options, "step_per_bucket", 1));
  o.step_per_bucket = per_bucket == 1;
  ASSIGN_OR_RETURN(o.optimizer, env.make_optimizer(optim::ParamRange{0, env.size}));
  o.make_device_stepper = std::move(env.make_device_stepper);
  return CreateAllreduceSync(std::move(o));
}

TANDEM_REGISTER_SYNC_STRATEGY(AllreduceInfo(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
