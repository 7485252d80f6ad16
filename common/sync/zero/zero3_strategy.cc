// Registers the `zero3` strategy (zero3_sync.h, ZeRO stage 3) with the
// registry: parameters, gradients and optimizer state sharded 1/N, each
// layer's parameters gathered through the model's parameter hook.
#include <memory>
#include <utility>

#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/zero/zero3_sync.h"

namespace tandem {
namespace sync {
namespace {

absl::StatusOr<PageRelease> ReleaseOption(const SyncOptions& o) {
  auto it = o.opts.find("release");
  return ParsePageRelease(it == o.opts.end() ? "lazy" : it->second);
}

// group_mb and gather_mb (zero3_sync.h), checked here so a bad value is
// refused when the options are parsed, before any rank starts.
absl::Status GroupOptions(const SyncOptions& o, Zero3SyncOptions* out) {
  ASSIGN_OR_RETURN(const double group_mb, GetSyncOptDouble(o, "group_mb", kDefaultGroupMb));
  ASSIGN_OR_RETURN(const double gather_mb, GetSyncOptDouble(o, "gather_mb", 1));
  RETURN_IF_ERROR(CheckZero3GroupOptions(group_mb, gather_mb));
  if (out != nullptr) {
    out->group_mb = group_mb;
    out->gather_mb = gather_mb;
  }
  return absl::OkStatus();
}

StrategyInfo Zero3Info() {
  StrategyInfo info;
  info.name = "zero3";
  info.summary =
      "ZeRO-3: parameters, reduced gradients and optimizer state sharded 1/N; each layer's parameters gathered just before its forward and backward (the next one prefetched) and freed after; gradient buckets reduced to their owners while backward runs";
  info.options = {{"bucket_cap_mb", "25", "MiB per gradient bucket"},
                  {"group_mb", "4",
                   "consecutive layers gathered by one collective until the group holds this "
                   "many MiB (0 = every layer alone); at most two groups are held at once"},
                  {"gather_mb", "1", "MiB of staging per allgather round of a group's pieces"},
                  {"release", "lazy",
                   "freed parameter/gradient pages: lazy (MADV_FREE, the OS takes them under "
                   "pressure) | now (MADV_DONTNEED, RSS drops at once, slower) | keep"}};
  info.validate = [](const SyncOptions& o) -> absl::Status {
    RETURN_IF_ERROR(ReleaseOption(o).status());
    return GroupOptions(o, nullptr);
  };
  // Layers are gathered in two levels across nodes when the groups are
  // there (zero_parts.h); flat over the world otherwise.
  info.uses_node_groups = [](const SyncOptions&) { return true; };
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateFromRegistry(const SyncOptions& options,
                                                                 SyncEnv env) {
  Zero3SyncOptions o;
  o.comm = env.comms->world.get();
  o.groups = env.comms;
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.layer_ranges = std::move(env.layer_ranges);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  ASSIGN_OR_RETURN(o.release, ReleaseOption(options));
  RETURN_IF_ERROR(GroupOptions(options, &o));
  o.make_optimizer = std::move(env.make_optimizer);
  o.make_device_stepper = std::move(env.make_device_stepper);
  absl::StatusOr<std::unique_ptr<Zero3Sync>> s = CreateZero3Sync(std::move(o));
  if (!s.ok()) return s.status();
  return std::unique_ptr<GradientSync>(std::move(*s));
}

TANDEM_REGISTER_SYNC_STRATEGY(Zero3Info(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
