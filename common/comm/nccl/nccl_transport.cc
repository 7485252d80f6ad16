#include "common/comm/nccl/nccl_transport.h"

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/factory.h"

namespace tandem {

NcclKv NcclKvOverStore(gloo::rendezvous::Store* store) {
  NcclKv kv;
  kv.put = [store](const std::string& key, const std::string& value) -> absl::Status {
    try {
      store->set(key, std::vector<char>(value.begin(), value.end()));
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("store set ", key, ": ", e.what()));
    }
    return absl::OkStatus();
  };
  kv.get = [store](const std::string& key, absl::Duration timeout) -> absl::StatusOr<std::string> {
    try {
      store->wait({key}, absl::ToChronoMilliseconds(timeout));
      std::vector<char> v = store->get(key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      return absl::DeadlineExceededError(absl::StrCat("store get ", key, ": ", e.what()));
    }
  };
  return kv;
}

namespace {

absl::StatusOr<std::unique_ptr<Communicator>> CreateNccl(const CommOptions& o) {
  NcclOptions n;
  n.rank = o.rank;
  n.world_size = o.world_size;
  n.device = o.cuda_device;
  n.kv = NcclKvOverStore(o.store);
  n.prefix = o.prefix;
  n.timeout = o.timeout;
  n.wait_stream = static_cast<cudaStream_t>(o.cuda_stream);
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> c = NcclCommunicator::Create(n);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(std::move(*c));
}

// alwayslink keeps this initialiser: nothing references this file's symbols.
[[maybe_unused]] const bool kNcclRegistered = RegisterTransport("nccl", CreateNccl);

}  // namespace
}  // namespace tandem
