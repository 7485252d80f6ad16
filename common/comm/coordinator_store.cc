#include "common/comm/coordinator_store.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/grpc_status.h"
#include "gloo/common/error.h"
#include "grpcpp/client_context.h"

namespace tandem {
namespace {

constexpr int kSetAttempts = 5;

std::chrono::system_clock::time_point ToChrono(absl::Time t) { return absl::ToChronoTime(t); }

[[noreturn]] void Throw(const std::string& message) { throw gloo::IoException(message); }

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorStore>> CoordinatorStore::Create(
    const CoordinatorStoreOptions& options) {
  if (options.channel == nullptr) {
    return absl::InvalidArgumentError("coordinator store: a channel to the coordinator is required");
  }
  if (options.generation < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "coordinator store: generation is ", options.generation,
        "; pass the generation Join returned (>= 1)"));
  }
  if (options.default_wait <= absl::ZeroDuration() || options.rpc_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("coordinator store: timeouts must be positive");
  }
  return std::unique_ptr<CoordinatorStore>(new CoordinatorStore(options));
}

CoordinatorStore::CoordinatorStore(const CoordinatorStoreOptions& options)
    : options_(options), stub_(v1::Coordinator::NewStub(options.channel)) {}

void CoordinatorStore::set(const std::string& key, const std::vector<char>& data) {
  v1::KvSetRequest request;
  request.mutable_job()->set_job_id(options_.job_id);
  request.set_generation(options_.generation);
  request.set_key(key);
  request.set_value(std::string(data.begin(), data.end()));
  absl::Duration backoff = absl::Milliseconds(50);
  absl::Status status;
  // KvSet is idempotent: UNAVAILABLE (coordinator restarting, a dropped
  // connection) is retried with backoff.
  for (int attempt = 1; attempt <= kSetAttempts; ++attempt) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ToChrono(absl::Now() + options_.rpc_timeout));
    ctx.set_wait_for_ready(true);
    v1::KvSetResponse response;
    status = FromGrpcStatus(stub_->KvSet(&ctx, request, &response));
    if (status.ok()) return;
    if (status.code() != absl::StatusCode::kUnavailable) break;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  Throw(absl::StrCat("coordinator store: set of key '", key, "' (generation ",
                     options_.generation, ") failed: ", status.ToString()));
}

std::vector<std::string> CoordinatorStore::Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout, const char* what) {
  v1::KvGetRequest request;
  request.mutable_job()->set_job_id(options_.job_id);
  request.set_generation(options_.generation);
  for (const std::string& k : keys) request.add_keys(k);
  const absl::Time deadline = absl::Now() + std::max(timeout, absl::ZeroDuration());
  absl::Duration backoff = absl::Milliseconds(50);
  absl::Status status;
  while (true) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    request.set_timeout_ms(absl::ToInt64Milliseconds(left));
    grpc::ClientContext ctx;
    // The server waits up to `left`; give the reply rpc_timeout on top.
    ctx.set_deadline(ToChrono(absl::Now() + left + options_.rpc_timeout));
    ctx.set_wait_for_ready(true);
    v1::KvGetResponse response;
    status = FromGrpcStatus(stub_->KvGet(&ctx, request, &response));
    if (status.ok()) {
      if (response.values_size() != static_cast<int>(keys.size())) {
        Throw(absl::StrCat("coordinator store: ", what, " got ", response.values_size(),
                           " values for ", keys.size(), " keys"));
      }
      return std::vector<std::string>(response.values().begin(), response.values().end());
    }
    if (status.code() != absl::StatusCode::kUnavailable || absl::Now() + backoff >= deadline) break;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  const std::string names = absl::StrJoin(keys, "', '");
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    Throw(absl::StrCat("coordinator store: Timed out after ", absl::FormatDuration(timeout),
                       " in ", what, " for key(s) '", names, "' (generation ",
                       options_.generation, "): a peer did not publish its address"));
  }
  Throw(absl::StrCat("coordinator store: ", what, " for key(s) '", names, "' (generation ",
                     options_.generation, ") failed: ", status.ToString()));
}

std::vector<char> CoordinatorStore::get(const std::string& key) {
  std::vector<std::string> values = Get({key}, options_.default_wait, "get");
  return std::vector<char>(values[0].begin(), values[0].end());
}

void CoordinatorStore::wait(const std::vector<std::string>& keys) {
  Get(keys, options_.default_wait, "wait");
}

void CoordinatorStore::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  Get(keys, absl::FromChrono(timeout), "wait");
}

}  // namespace tandem
