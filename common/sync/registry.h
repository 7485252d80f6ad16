// The strategy registry: `--sync NAME --sync_opt key=value,...` -> a
// GradientSync. Each strategy registers itself from its own files
// (TANDEM_REGISTER_SYNC_STRATEGY in its .cc, in an alwayslink cc_library), so
// adding a strategy never edits the trainer or this file.
//
//   ASSIGN_OR_RETURN(SyncOptions o, ParseSyncOptions("allreduce", "bucket_cap_mb=8"));
//   RETURN_IF_ERROR(ValidateSyncOptions(o));      // at flag-parsing time
//   SyncEnv env;  env.comms = &groups;  env.params = ...;  env.make_optimizer = ...;
//   ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> s, CreateGradientSync(o, std::move(env)));
//
// Errors: an unknown strategy is INVALID_ARGUMENT listing the registered
// ones; an unknown --sync_opt key or a bad value is INVALID_ARGUMENT naming
// the key and listing the strategy's keys with their meanings and defaults.
// The typed keys bucket_cap_mb and max_grad_norm are accepted by every
// strategy (one that has no buckets ignores bucket_cap_mb).
// Thread-safety: registration happens during static initialisation; every
// function here is safe to call concurrently afterwards.
#ifndef TANDEM_COMMON_SYNC_REGISTRY_H_
#define TANDEM_COMMON_SYNC_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/groups.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

// Every strategy's knobs, in one struct. The typed fields are shared by all
// strategies; `opts` holds the strategy-specific --sync_opt keys (strings,
// parsed and validated by the strategy).
struct SyncOptions {
  std::string strategy = "allreduce";
  double bucket_cap_mb = 25;   // MiB of fp32 gradients per bucket, > 0
  double max_grad_norm = 0;    // global L2 clip across ranks; 0 = off
  std::map<std::string, std::string> opts;
};

// Where strategies that step on shard servers (ps, hybrid) find them, and
// who this worker is to them. Empty for every other strategy.
struct ShardServerEnv {
  std::vector<std::string> addresses;  // host:port of every server, in order
  std::string job_id;
  int64_t generation = 0;              // this generation's number (>= 1)
  // The trainer's learning-rate schedule (the lr of 1-based update `step`).
  // With it, pushes leave while backward runs; without it (or when it
  // returns a non-finite value) they wait for FinishStep's context.
  std::function<float(int64_t step)> learning_rate;
};

// What one generation gives a strategy. Pointers are borrowed and outlive it.
struct SyncEnv {
  CommGroups* comms = nullptr;  // world (always), intra / inter (when asked)
  float* params = nullptr;            // flat parameters [0, size)
  float* grads = nullptr;             // flat gradients, same layout
  int64_t size = 0;
  // The ranges backward reports, in backward order (nn::GroupRanges).
  std::vector<std::pair<int64_t, int64_t>> ready_ranges;
  // The ranges the model's parameter hook gathers, in forward order
  // (Model::param_hook_ranges()); only zero3 uses them (for prefetching).
  std::vector<std::pair<int64_t, int64_t>> layer_ranges;
  // Every parameter's offset and shape, in layout order; only compressed
  // codec=powersgd uses them (it compresses each weight as a matrix).
  std::vector<ParamShape> param_shapes;
  // Builds the optimizer over the range the strategy owns.
  std::function<absl::StatusOr<std::unique_ptr<optim::Optimizer>>(optim::ParamRange)>
      make_optimizer;
  // Device backends: builds the device finish (DeviceStepperFactoryFor in
  // device_stepper_registry.h); empty for host memory. The strategy calls it
  // with its optimizer and owns the result.
  optim::DeviceStepperFactory make_device_stepper;
  // A host-memory communicator over the same ranks as comms->world (the
  // worker's control mesh); may be null. zero1 / zero2 in device memory
  // combine the shards' gradient norms over it.
  Communicator* host_comm = nullptr;
  ShardServerEnv shard_servers;  // ps / hybrid only
  // The SGD momentum, for a strategy that takes it over (TakesMomentum):
  // the worker then builds make_optimizer's optimizer with momentum 0.
  // Ignored by every other strategy.
  float momentum = 0;
};

struct OptionInfo {
  std::string key;
  std::string default_value;
  std::string meaning;  // one line
};

struct StrategyInfo {
  std::string name;     // "allreduce"
  std::string summary;  // one line, for --help
  std::vector<OptionInfo> options;  // the --sync_opt keys it accepts
  // Needs the intra-node and inter-node groups (hierarchical strategies).
  bool needs_node_groups = false;
  // When set, decides instead of needs_node_groups from the (valid) options,
  // for strategies where only some settings need node groups (allreduce
  // with hier=1). Callers use NeedsNodeGroups(), never the fields.
  std::function<bool(const SyncOptions&)> wants_node_groups;
  // Uses the node groups when they are there and works without them
  // (zero3's two-level layer gathers); the worker builds them when this
  // says so. Callers use BuildNodeGroups().
  std::function<bool(const SyncOptions&)> uses_node_groups;
  // Applies the SGD momentum itself for these (valid) options (compressed
  // with momentum_correction=1): the worker must then pass the momentum in
  // SyncEnv::momentum and build the optimizer without it (plain sgd, no
  // nesterov). Empty = never. Callers use TakesMomentum().
  std::function<bool(const SyncOptions&)> takes_momentum;
  // Clips by max_grad_norm. When false the key is left out of the valid keys
  // the errors list (validate refuses a nonzero value with the reason).
  bool clips = true;
  // Checks the values of `opts` (keys are already known to be valid);
  // empty = any value.
  std::function<absl::Status(const SyncOptions&)> validate;
};

using StrategyFactory =
    std::function<absl::StatusOr<std::unique_ptr<GradientSync>>(const SyncOptions&, SyncEnv)>;

// Returns true so it can initialise a static; a second registration of a
// name aborts at start-up (a build error, not a user error).
bool RegisterStrategy(StrategyInfo info, StrategyFactory factory);

// Registered strategies, sorted by name.
std::vector<StrategyInfo> RegisteredStrategies();
absl::StatusOr<StrategyInfo> FindStrategy(const std::string& name);

// "k1=v1,k2=v2" (empty = none) into SyncOptions::opts; "bucket_cap_mb" and
// "max_grad_norm" may also be given here and land in the typed fields.
// Syntax errors (no '=', empty key, a key twice) are INVALID_ARGUMENT.
absl::StatusOr<SyncOptions> ParseSyncOptions(const std::string& strategy,
                                             const std::string& sync_opt);
// Unknown strategy / key, bad values, bucket_cap_mb <= 0, max_grad_norm < 0.
absl::Status ValidateSyncOptions(const SyncOptions& options);

// Whether the generation must build CommGroups with node_groups = true
// (intra and inter) for `options` of the strategy `info`:
// info.wants_node_groups(options) when set, else info.needs_node_groups.
// `options` should be valid (ValidateSyncOptions); CreateGradientSync
// rejects an env without the groups this returns true for.
bool NeedsNodeGroups(const StrategyInfo& info, const SyncOptions& options);
// Whether a worker should build them: needed, or used when there.
bool BuildNodeGroups(const StrategyInfo& info, const SyncOptions& options);
// Whether the strategy applies the SGD momentum itself for `options`
// (info.takes_momentum(options) when set, else false).
bool TakesMomentum(const StrategyInfo& info, const SyncOptions& options);

// Validates `options`, checks `env` (comms->world always; intra / inter
// when NeedsNodeGroups; params / grads when size > 0;
// make_optimizer) and calls the strategy's factory.
absl::StatusOr<std::unique_ptr<GradientSync>> CreateGradientSync(const SyncOptions& options,
                                                                 SyncEnv env);

// For strategies reading their own keys: options.opts[key] as a number, or
// `default_value` when absent; INVALID_ARGUMENT naming the key when the value
// does not parse (range checks are the strategy's).
absl::StatusOr<int64_t> GetSyncOptInt(const SyncOptions& options, const std::string& key,
                                      int64_t default_value);
absl::StatusOr<double> GetSyncOptDouble(const SyncOptions& options, const std::string& key,
                                        double default_value);

}  // namespace sync
}  // namespace tandem

#define TANDEM_SYNC_CONCAT_INNER(a, b) a##b
#define TANDEM_SYNC_CONCAT(a, b) TANDEM_SYNC_CONCAT_INNER(a, b)
// In a strategy's .cc: TANDEM_REGISTER_SYNC_STRATEGY(info_expr, factory_expr);
#define TANDEM_REGISTER_SYNC_STRATEGY(info, factory)                      \
  static const bool TANDEM_SYNC_CONCAT(tandem_sync_registered_, __LINE__) = \
      ::tandem::sync::RegisterStrategy((info), (factory))

#endif  // TANDEM_COMMON_SYNC_REGISTRY_H_
