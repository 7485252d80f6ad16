// Registers the `compressed` strategy (compressed_sync.h): --sync compressed
// --sync_opt codec=int8|fp16|bf16|topk|threshold plus the codec's keys
// (k for topk; density, max_density for threshold; chunk, rounding for
// int8), ef, warmup_steps, min_bucket_kb, hier and momentum_correction. A key
// that the chosen codec does not use is refused (codec=int8,k=0.01 is a
// mistake, not a no-op). momentum_correction=1 takes the SGD momentum over
// from the worker's optimizer (StrategyInfo::takes_momentum).
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/sync/compressed/compressed_sync.h"
#include "common/sync/registry.h"

namespace tandem {
namespace sync {

using codec::CodecConfig;
using codec::ValidateCodecConfig;
namespace {

std::string GetString(const SyncOptions& o, const std::string& key, const std::string& def) {
  auto it = o.opts.find(key);
  return it == o.opts.end() ? def : it->second;
}

// --sync_opt -> the strategy's options (everything but the env's parts).
absl::Status ParseCompressedOptions(const SyncOptions& o, CompressedSyncOptions* out) {
  CodecConfig& c = out->codec;
  c.codec = GetString(o, "codec", "int8");
  ASSIGN_OR_RETURN(c.k, GetSyncOptDouble(o, "k", 0.01));
  ASSIGN_OR_RETURN(c.density, GetSyncOptDouble(o, "density", 0.01));
  ASSIGN_OR_RETURN(c.max_density, GetSyncOptDouble(o, "max_density", 0));
  ASSIGN_OR_RETURN(c.chunk, GetSyncOptInt(o, "chunk", 1024));
  c.rounding = GetString(o, "rounding", "nearest");
  RETURN_IF_ERROR(ValidateCodecConfig(c));
  const std::pair<const char*, const char*> uses[] = {
      {"k", "topk"},           {"density", "threshold"}, {"max_density", "threshold"},
      {"chunk", "int8"},       {"rounding", "int8"}};
  for (const auto& [key, codec] : uses) {
    if (o.opts.count(key) != 0 && c.codec != codec) {
      return absl::InvalidArgumentError(absl::StrCat(key, " applies to codec=", codec,
                                                     " only, but codec=", c.codec));
    }
  }
  ASSIGN_OR_RETURN(const int64_t ef, GetSyncOptInt(o, "ef", 1));
  if (ef != 0 && ef != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ef must be 1 (error feedback) or 0 (none), got ", ef));
  }
  out->error_feedback = ef == 1;
  ASSIGN_OR_RETURN(const int64_t mc, GetSyncOptInt(o, "momentum_correction", 0));
  if (mc != 0 && mc != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "momentum_correction must be 0 (momentum in the optimizer) or 1 (DGC momentum "
        "correction in the strategy), got ", mc));
  }
  out->momentum_correction = mc == 1;
  ASSIGN_OR_RETURN(const int64_t mask, GetSyncOptInt(o, "masking", 1));
  if (mask != 0 && mask != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masking must be 1 (zero the velocity of sent values, DGC) or 0 (keep it), got ", mask));
  }
  if (o.opts.count("masking") != 0 && !out->momentum_correction) {
    return absl::InvalidArgumentError(
        "masking applies to momentum_correction=1 only: add momentum_correction=1 or drop masking");
  }
  out->momentum_masking = mask == 1;
  if (out->momentum_correction && c.codec != "topk" && c.codec != "threshold") {
    return absl::InvalidArgumentError(absl::StrCat(
        "momentum_correction=1 needs a sparse codec: use codec=topk or codec=threshold (got "
        "codec=", c.codec, "), or drop momentum_correction"));
  }
  if (out->momentum_correction && !out->error_feedback) {
    return absl::InvalidArgumentError(
        "momentum_correction=1 needs error feedback: the velocity is accumulated into the "
        "residuals; set ef=1 (the default) or drop momentum_correction");
  }
  ASSIGN_OR_RETURN(out->warmup_steps, GetSyncOptInt(o, "warmup_steps", 0));
  if (out->warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("warmup_steps must be >= 0, got ", out->warmup_steps));
  }
  ASSIGN_OR_RETURN(const int64_t hier, GetSyncOptInt(o, "hier", 0));
  if (hier != 0 && hier != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hier must be 0 (exchange over every rank) or 1 (reduce inside each node first), got ",
        hier));
  }
  out->hierarchical = hier == 1;
  ASSIGN_OR_RETURN(out->min_bucket_kb, GetSyncOptDouble(o, "min_bucket_kb", 0));
  if (!(out->min_bucket_kb >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_bucket_kb must be >= 0, got ", out->min_bucket_kb));
  }
  return absl::OkStatus();
}

StrategyInfo CompressedInfo() {
  StrategyInfo info;
  info.name = "compressed";
  info.summary =
      "gradient compression: per bucket, all-to-all of compressed slices, fp32 sums "
      "re-compressed and allgathered (sparse codecs: allgather of index/value pairs), with "
      "error feedback; then average, clip and the optimizer on every rank";
  info.options = {
      {"codec", "int8", "int8 | fp16 | bf16 | topk | threshold"},
      {"ef", "1", "1 = error feedback (residuals carried to the next step), 0 = none"},
      {"k", "0.01", "topk: fraction of each bucket kept, (0, 1]"},
      {"density", "0.01", "threshold: target fraction kept, (0, 1]"},
      {"max_density", "0", "threshold: most kept (block capacity); 0 = 2 x density"},
      {"chunk", "1024", "int8: values per scale, 256..2048"},
      {"rounding", "nearest", "int8: nearest | stochastic"},
      {"warmup_steps", "0", "first steps sent uncompressed"},
      {"min_bucket_kb", "0", "buckets smaller than this many KiB are sent uncompressed"},
      {"hier", "0",
       "1 = dense codecs: sum inside each node first (fp32, shared memory), exchange each "
       "local rank's share compressed across nodes, allgather inside the node"},
      {"momentum_correction", "0",
       "1 = topk / threshold with ef=1: DGC momentum correction with momentum factor masking "
       "(each rank accumulates u = m u + g into its residual, sent values' u zeroed); the "
       "worker's --momentum moves into the strategy (--optimizer sgd, no --nesterov) and the "
       "optimizer steps without momentum"},
      {"masking", "1",
       "momentum_correction=1: 1 = momentum factor masking (sent values' u zeroed), 0 = u kept"},
      {"bucket_cap_mb", "25", "MiB per gradient bucket"}};
  // hier=1 needs the intra-node and inter-node groups.
  info.wants_node_groups = [](const SyncOptions& o) {
    absl::StatusOr<int64_t> hier = GetSyncOptInt(o, "hier", 0);
    return hier.ok() && *hier == 1;
  };
  info.takes_momentum = [](const SyncOptions& o) {
    absl::StatusOr<int64_t> mc = GetSyncOptInt(o, "momentum_correction", 0);
    return mc.ok() && *mc == 1;
  };
  info.validate = [](const SyncOptions& o) -> absl::Status {
    CompressedSyncOptions parsed;
    return ParseCompressedOptions(o, &parsed);
  };
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateFromRegistry(const SyncOptions& options,
                                                                 SyncEnv env) {
  CompressedSyncOptions o;
  RETURN_IF_ERROR(ParseCompressedOptions(options, &o));
  o.comm = env.comms->world.get();
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  o.groups = env.comms;
  o.momentum = env.momentum;
  ASSIGN_OR_RETURN(o.optimizer, env.make_optimizer(optim::ParamRange{0, env.size}));
  o.make_device_stepper = std::move(env.make_device_stepper);
  return CreateCompressedSync(std::move(o));
}

TANDEM_REGISTER_SYNC_STRATEGY(CompressedInfo(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
