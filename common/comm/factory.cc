#include "common/comm/factory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace {

// Function-local so registrations from other translation units' static
// initialisers (gloo_transport, shm_transport, nccl_transport) never see it
// unconstructed.
struct Registry {
  absl::Mutex mu;
  std::map<std::string, TransportCreator> creators ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // never destroyed: used at exit
  return *registry;
}

// Every transport tandem has, linked into this binary or not.
constexpr const char* kKnown[] = {"gloo", "shm", "nccl"};

bool Known(const std::string& name) {
  return std::find(std::begin(kKnown), std::end(kKnown), name) != std::end(kKnown);
}

}  // namespace

bool RegisterTransport(const std::string& name, TransportCreator creator) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  if (!creator) {
    std::fprintf(stderr, "tandem: communicator transport '%s' registered without a creator\n",
                 name.c_str());
    std::abort();
  }
  if (!r.creators.emplace(name, std::move(creator)).second) {
    // Two libraries claim one name: a link error in spirit; refuse to start.
    std::fprintf(stderr, "tandem: communicator transport '%s' registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

std::vector<std::string> AvailableTransports() {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, creator] : r.creators) names.push_back(name);
  return names;  // std::map: sorted
}

bool TransportAvailable(const std::string& name) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  return r.creators.count(name) > 0;
}

absl::Status CheckTransport(const std::string& name) {
  if (TransportAvailable(name)) return absl::OkStatus();
  const std::string have = absl::StrJoin(AvailableTransports(), ", ");
  if (!Known(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "transport '", name, "' is unknown: use gloo, shm or nccl (this binary has ", have, ")"));
  }
  if (name == "nccl") {
    return absl::UnimplementedError(absl::StrCat(
        "transport 'nccl' is not in this binary (built without CUDA): build where the CUDA "
        "toolkit is installed (the binary then links //common/comm/nccl:nccl_transport), or use "
        "one of ",
        have));
  }
  return absl::UnimplementedError(
      absl::StrCat("transport '", name, "' is not in this binary: use one of ", have));
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const CommOptions& options) {
  TransportCreator creator;
  {
    Registry& r = GetRegistry();
    absl::MutexLock lock(&r.mu);
    auto it = r.creators.find(options.transport);
    if (it != r.creators.end()) creator = it->second;
  }
  if (!creator) {
    RETURN_IF_ERROR(CheckTransport(options.transport));
    // Registered between the lookup and the check: look again.
    return CreateCommunicator(options);
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(options.transport, ": rank ", options.rank,
                                                   " is not in a world of ", options.world_size,
                                                   " (need 0 <= rank < world_size)"));
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.transport, ": CommOptions.store is required (the rendezvous store)"));
  }
  return creator(options);
}

}  // namespace tandem
