#include "common/sync/registry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {
namespace {

struct Entry {
  StrategyInfo info;
  StrategyFactory factory;
};

// Function-local statics: registration runs during other translation units'
// static initialisation, in no particular order.
absl::Mutex& RegistryMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}
std::map<std::string, Entry>& Registry() {
  static auto* registry = new std::map<std::string, Entry>();
  return *registry;
}

// The typed SyncOptions fields, accepted by every strategy.
const std::vector<OptionInfo>& SharedOptions() {
  static const auto* shared = new std::vector<OptionInfo>{
      {"bucket_cap_mb", "25", "MiB of fp32 gradients per bucket, > 0"},
      {"max_grad_norm", "0", "global L2 clip across ranks, 0 = off"},
  };
  return *shared;
}

bool IsSharedKey(const std::string& key) {
  for (const OptionInfo& o : SharedOptions()) {
    if (o.key == key) return true;
  }
  return false;
}

std::string RegisteredNames() ABSL_EXCLUSIVE_LOCKS_REQUIRED(RegistryMutex()) {
  std::vector<std::string> names;
  for (const auto& kv : Registry()) names.push_back(kv.first);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<Entry> FindEntry(const std::string& name) {
  absl::MutexLock lock(&RegistryMutex());
  auto it = Registry().find(name);
  if (it != Registry().end()) return it->second;
  if (Registry().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync '", name,
                     "' is unknown: this binary registers no gradient sync strategy "
                     "(link a strategy library such as //common/sync/allreduce:allreduce_strategy)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--sync '", name, "' is unknown: registered strategies are ", RegisteredNames()));
}

// "key (meaning, default d), ..." over the strategy's keys, then the shared
// typed keys it does not list itself.
std::string DescribeKeys(const StrategyInfo& info) {
  std::vector<std::string> parts;
  auto describe = [&parts](const OptionInfo& o) {
    parts.push_back(absl::StrCat(o.key, " (", o.meaning, ", default ", o.default_value, ")"));
  };
  for (const OptionInfo& o : info.options) describe(o);
  for (const OptionInfo& o : SharedOptions()) {
    bool listed = false;
    for (const OptionInfo& mine : info.options) listed = listed || mine.key == o.key;
    const bool unsupported = o.key == "max_grad_norm" && !info.clips;
    if (!listed && !unsupported) describe(o);
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<double> ParseDouble(const std::string& key, const std::string& value) {
  double d = 0;
  if (!absl::SimpleAtod(value, &d) || !std::isfinite(d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt ", key, "='", value, "' is not a finite number"));
  }
  return d;
}

}  // namespace

bool RegisterStrategy(StrategyInfo info, StrategyFactory factory) {
  absl::MutexLock lock(&RegistryMutex());
  if (info.name.empty() || !factory) {
    std::fprintf(stderr, "tandem sync registry: a strategy needs a name and a factory\n");
    std::abort();
  }
  if (Registry().count(info.name) != 0) {
    std::fprintf(stderr,
                 "tandem sync registry: strategy '%s' is registered twice (two libraries "
                 "register the same --sync name)\n",
                 info.name.c_str());
    std::abort();
  }
  const std::string name = info.name;
  Registry().emplace(name, Entry{std::move(info), std::move(factory)});
  return true;
}

std::vector<StrategyInfo> RegisteredStrategies() {
  absl::MutexLock lock(&RegistryMutex());
  std::vector<StrategyInfo> out;
  out.reserve(Registry().size());
  for (const auto& kv : Registry()) out.push_back(kv.second.info);
  return out;
}

absl::StatusOr<StrategyInfo> FindStrategy(const std::string& name) {
  ASSIGN_OR_RETURN(Entry entry, FindEntry(name));
  return entry.info;
}

absl::StatusOr<SyncOptions> ParseSyncOptions(const std::string& strategy,
                                             const std::string& sync_opt) {
  SyncOptions options;
  options.strategy = strategy;
  if (absl::StripAsciiWhitespace(sync_opt).empty()) return options;
  bool seen_cap = false;
  bool seen_norm = false;
  for (absl::string_view raw : absl::StrSplit(sync_opt, ',')) {
    const absl::string_view item = absl::StripAsciiWhitespace(raw);
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sync_opt '", sync_opt,
                       "' has an empty item: write key=value pairs separated by "
                       "single commas, e.g. bucket_cap_mb=8"));
    }
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sync_opt item '", item, "' has no '=': write key=value, e.g. ", item, "=1"));
    }
    const std::string key(absl::StripAsciiWhitespace(item.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(item.substr(eq + 1)));
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sync_opt item '", item, "' has an empty key: write key=value"));
    }
    if (value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sync_opt key '", key, "' has an empty value: write ", key, "=VALUE"));
    }
    const bool repeated = key == "bucket_cap_mb"   ? std::exchange(seen_cap, true)
                          : key == "max_grad_norm" ? std::exchange(seen_norm, true)
                                                   : options.opts.count(key) != 0;
    if (repeated) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sync_opt key '", key, "' is given twice: give each key once"));
    }
    if (key == "bucket_cap_mb") {
      ASSIGN_OR_RETURN(options.bucket_cap_mb, ParseDouble(key, value));
    } else if (key == "max_grad_norm") {
      ASSIGN_OR_RETURN(options.max_grad_norm, ParseDouble(key, value));
    } else {
      options.opts[key] = value;
    }
  }
  return options;
}

absl::Status ValidateSyncOptions(const SyncOptions& options) {
  ASSIGN_OR_RETURN(Entry entry, FindEntry(options.strategy));
  const StrategyInfo& info = entry.info;
  for (const auto& kv : options.opts) {
    bool known = IsSharedKey(kv.first);
    for (const OptionInfo& o : info.options) known = known || o.key == kv.first;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat("--sync_opt key '", kv.first,
                                                     "' is not an option of strategy '", info.name,
                                                     "': valid keys are ", DescribeKeys(info)));
    }
  }
  if (!(options.bucket_cap_mb > 0) || !std::isfinite(options.bucket_cap_mb)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket_cap_mb must be a positive number of MiB, got ", options.bucket_cap_mb));
  }
  if (!(options.max_grad_norm >= 0) || !std::isfinite(options.max_grad_norm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_grad_norm must be >= 0 (0 = no clipping), got ", options.max_grad_norm));
  }
  if (info.validate) {
    absl::Status s = info.validate(options);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("--sync ", info.name, ": ", s.message(),
                                                 " (valid keys: ", DescribeKeys(info), ")"));
    }
  }
  return absl::OkStatus();
}

bool NeedsNodeGroups(const StrategyInfo& info, const SyncOptions& options) {
  return info.wants_node_groups ? info.wants_node_groups(options) : info.needs_node_groups;
}

bool BuildNodeGroups(const StrategyInfo& info, const SyncOptions& options) {
  return NeedsNodeGroups(info, options) || (info.uses_node_groups && info.uses_node_groups(options));
}

bool TakesMomentum(const StrategyInfo& info, const SyncOptions& options) {
  return info.takes_momentum && info.takes_momentum(options);
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateGradientSync(const SyncOptions& options,
                                                                 SyncEnv env) {
  RETURN_IF_ERROR(ValidateSyncOptions(options));
  ASSIGN_OR_RETURN(Entry entry, FindEntry(options.strategy));
  if (env.comms == nullptr || env.comms->world == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync ", options.strategy, ": SyncEnv::comms with a world communicator is required"));
  }
  if (NeedsNodeGroups(entry.info, options) &&
      (env.comms->intra == nullptr || env.comms->inter == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sync ", options.strategy,
        " needs the intra-node and inter-node groups with these options: build CommGroups "
        "with node_groups = NeedsNodeGroups(info, options)"));
  }
  if (env.size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync ", options.strategy, ": negative parameter count ", env.size));
  }
  if (env.size > 0 && (env.params == nullptr || env.grads == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync ", options.strategy, ": SyncEnv params and grads are required"));
  }
  if (!env.make_optimizer) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync ", options.strategy, ": SyncEnv::make_optimizer is required"));
  }
  return entry.factory(options, std::move(env));
}

absl::StatusOr<int64_t> GetSyncOptInt(const SyncOptions& options, const std::string& key,
                                      int64_t default_value) {
  auto it = options.opts.find(key);
  if (it == options.opts.end()) return default_value;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt ", key, "='", it->second, "' is not an integer"));
  }
  return v;
}

absl::StatusOr<double> GetSyncOptDouble(const SyncOptions& options, const std::string& key,
                                        double default_value) {
  auto it = options.opts.find(key);
  if (it == options.opts.end()) return default_value;
  return ParseDouble(key, it->second);
}

}  // namespace sync
}  // namespace tandem
