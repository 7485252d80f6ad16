#include "common/comm/factory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace {

// Function-local so registrations from other translation units' static
// initialisers (nccl_transport) never see it unconstructed.
struct Registry {
  absl::Mutex mu;
  std::map<std::string, TransportCreator> creators ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // never destroyed: used at exit
  return *registry;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateGloo(const CommOptions& o) {
  GlooOptions g;
  g.rank = o.rank;
  g.world_size = o.world_size;
  g.store = o.store;
  g.prefix = o.prefix;
  g.hostname = o.hostname;
  g.timeout = o.timeout;
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> c = GlooCommunicator::Create(g);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(std::move(*c));
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateShm(const CommOptions& o) {
  ShmOptions s;
  s.rank = o.rank;
  s.world_size = o.world_size;
  s.store = o.store;
  s.prefix = o.prefix;
  s.chunk_bytes = o.shm_chunk_bytes;
  s.timeout = o.timeout;
  absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(s);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(std::move(*c));
}

// gloo and shm need nothing beyond the host, so this library carries them:
// every binary that can call CreateCommunicator has them, with no
// alwayslink target to forget.
[[maybe_unused]] const bool kGlooRegistered = RegisterTransport("gloo", CreateGloo);
[[maybe_unused]] const bool kShmRegistered = RegisterTransport("shm", CreateShm);

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
