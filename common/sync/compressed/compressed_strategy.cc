// Registers the `compressed` strategy: --sync compressed --sync_opt
// codec=int8|fp16|bf16|topk|threshold (compressed_sync.h) or codec=powersgd
// (powersgd_sync.h), each with its accurate defaults and keys
// (compressed_options.h); rank 0 logs the resolved configuration. A key that
// the chosen codec does not use is refused (codec=int8,k=0.01 is a mistake,
// not a no-op). momentum_correction=1 takes the SGD momentum over from the
// worker's optimizer (StrategyInfo::takes_momentum).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/log/log.h"
#include "common/sync/compressed/compressed_options.h"
#include "common/sync/compressed/compressed_sync.h"
#include "common/sync/compressed/powersgd_sync.h"
#include "common/sync/registry.h"

namespace tandem {
namespace sync {

namespace {

StrategyInfo CompressedInfo() {
  StrategyInfo info;
  info.name = "compressed";
  info.summary =
      "gradient compression: per bucket, all-to-all of compressed slices, fp32 sums "
      "re-compressed and allgathered (sparse codecs: allgather of index/value pairs; powersgd: "
      "ring allreduce of low-rank factors), with error feedback; then average, clip and the "
      "optimizer on every rank";
  info.options = {
      {"codec", "int8", CompressedCodecNames()},
      {"ef", "1", "1 = error feedback (residuals carried to the next step), 0 = none"},
      {"k", "0.01", "topk: fraction of each bucket kept, (0, 1]"},
      {"density", "0.01", "threshold: target fraction kept, (0, 1]"},
      {"max_density", "0", "threshold: most kept (block capacity); 0 = 2 x density"},
      {"chunk", "1024", "int8: values per scale, 256..2048"},
      {"rounding", "nearest", "int8: nearest | stochastic"},
      {"rank", "4", "powersgd: columns of the low-rank factors P and Q, >= 1"},
      {"min_compression", "2",
       "powersgd: a weight is compressed only if rows x cols >= this x (rows + cols) x rank; "
       "the rest (and 1-D tensors) go in one fp32 allreduce per bucket"},
      {"embeddings", "0",
       "powersgd: 1 = embedding tables (a name part containing 'embed', or wte / wpe) "
       "compressed too; 0 = sent uncompressed (their gradients are row-sparse)"},
      {"warmup_steps", "codec's",
       "first steps sent uncompressed: 200 for topk / threshold, 10 for powersgd, else 0"},
      {"min_bucket_kb", "0", "buckets smaller than this many KiB are sent uncompressed"},
      {"hier", "0",
       "1 = dense codecs: sum inside each node first (fp32, shared memory), exchange each "
       "local rank's share compressed across nodes, allgather inside the node"},
      {"momentum_correction", "codec's",
       "1 = topk / threshold with ef=1 (their default; 0 for every other codec): DGC momentum "
       "correction (each rank accumulates u = m u + g into its residual); the worker's "
       "--momentum moves into the strategy and the optimizer steps without momentum (with "
       "--optimizer adamw or --nesterov the default gives way: off)"},
      {"masking", "codec's",
       "momentum_correction=1: 1 = momentum factor masking (sent values' u zeroed, DGC), "
       "0 = u kept (the default of topk / threshold)"},
      {"bucket_cap_mb", "25", "MiB per gradient bucket"}};
  // hier=1 needs the intra-node and inter-node groups.
  info.wants_node_groups = [](const SyncOptions& o) {
    absl::StatusOr<int64_t> hier = GetSyncOptInt(o, "hier", 0);
    return hier.ok() && *hier == 1;
  };
  info.takes_momentum = [](const SyncOptions& o) {
    absl::StatusOr<ParsedCompressed> p = ParseCompressedOptions(o);
    return p.ok() && p->options.momentum_correction;
  };
  info.validate = [](const SyncOptions& o) { return ParseCompressedOptions(o).status(); };
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreatePowerSgd(const ParsedCompressed& p,
                                                             const SyncOptions& options,
                                                             SyncEnv env) {
  PowerSgdSyncOptions o;
  o.comm = env.comms->world.get();
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.param_shapes = std::move(env.param_shapes);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  o.groups = env.comms;
  o.rank = static_cast<int>(p.rank);
  o.warmup_steps = p.options.warmup_steps;
  o.min_compression = p.min_compression;
  o.compress_embeddings = p.compress_embeddings;
  o.error_feedback = p.options.error_feedback;
  ASSIGN_OR_RETURN(o.optimizer, env.make_optimizer(optim::ParamRange{0, env.size}));
  o.make_device_stepper = std::move(env.make_device_stepper);
  return CreatePowerSgdSync(std::move(o));
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateFromRegistry(const SyncOptions& options,
                                                                 SyncEnv env) {
  ASSIGN_OR_RETURN(ParsedCompressed p, ParseCompressedOptions(options));
  const bool rank0 = env.comms->world->rank() == 0;
  if (p.powersgd()) {
    if (rank0) LOG(INFO) << p.Header();
    return CreatePowerSgd(p, options, std::move(env));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> optimizer,
                   env.make_optimizer(optim::ParamRange{0, env.size}));
  // The codec's default momentum correction gives way to an optimizer that
  // keeps momentum of its own (the worker built adamw or nesterov sgd as
  // usual: it checks the key was not given).
  if (p.default_momentum_correction &&
      (optimizer->name() != "sgd" || !optimizer->state().empty())) {
    p.options.momentum_correction = false;
    p.defaulted.erase(std::remove(p.defaulted.begin(), p.defaulted.end(), "masking"),
                      p.defaulted.end());
    if (rank0) {
      LOG(INFO) << "compressed: momentum_correction off: the optimizer '" << optimizer->name()
                << "' keeps its own momentum state (set momentum_correction=0 to silence this)";
    }
  }
  if (rank0) LOG(INFO) << p.Header();
  CompressedSyncOptions o = std::move(p.options);
  o.optimizer = std::move(optimizer);
  o.comm = env.comms->world.get();
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  o.groups = env.comms;
  o.momentum = env.momentum;
  o.make_device_stepper = std::move(env.make_device_stepper);
  return CreateCompressedSync(std::move(o));
}

TANDEM_REGISTER_SYNC_STRATEGY(CompressedInfo(), CreateFromRegistry);

}  // namespace
}  // namespace sync
}  // namespace tandem
