// Client side of tandem's control plane: channels with message-size limits,
// and a retry loop with exponential backoff for idempotent calls.
//
//   auto channel = MakeChannel({.target = "127.0.0.1:7000"});
//   auto stub = tandem::v1::Coordinator::NewStub(channel);
//   tandem::v1::GetJobStatusResponse reply;
//   RETURN_IF_ERROR(CallWithRetry(RetryOptions{}, "Coordinator.GetJobStatus",
//       [&](grpc::ClientContext* ctx) { return stub->GetJobStatus(ctx, req, &reply); }));
//
// Every attempt gets a fresh ClientContext with the per-call deadline. Only
// UNAVAILABLE (and DEADLINE_EXCEEDED when retry_deadline_exceeded) are
// retried: use CallWithRetry only for idempotent calls. Thread-safe.
#ifndef TANDEM_COMMON_RPC_CHANNEL_H_
#define TANDEM_COMMON_RPC_CHANNEL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/rpc/tls.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace tandem {

struct ChannelOptions {
  std::string target;  // "host:port"
  int max_message_bytes = 256 << 20;
  // Sent with every call (common/rpc/auth.h); "" = DefaultAuthToken()
  // (still "" = none).
  std::string auth_token;
  // TLS settings; unset = the process default (common/rpc/tls.h).
  std::optional<TlsConfig> tls;
  // > 0: a fixed HTTP/2 receive window per stream of this many bytes (BDP
  // probing off) instead of gRPC's auto-tuned one, which grows with the
  // queueing delay of a congested link and so fills it further.
  int flow_window_bytes = 0;
};

std::shared_ptr<grpc::Channel> MakeChannel(const ChannelOptions& options);

struct RetryOptions {
  int max_attempts = 5;  // total attempts, >= 1
  absl::Duration call_timeout = absl::Seconds(10);  // deadline of each attempt
  absl::Duration initial_backoff = absl::Milliseconds(50);
  absl::Duration max_backoff = absl::Seconds(2);
  double multiplier = 2.0;
  bool retry_deadline_exceeded = true;
  // Wait for the channel to connect instead of failing fast while a server
  // (re)starts.
  bool wait_for_ready = true;
};

// Runs `call` until it succeeds, fails with a non-retryable code, or
// max_attempts is reached; returns the last status with `what` and the
// attempt count in the message.
absl::Status CallWithRetry(const RetryOptions& options, absl::string_view what,
                           const std::function<grpc::Status(grpc::ClientContext*)>& call);

// The backoff before attempt `attempt` (1-based count of failures so far),
// without jitter; exposed for tests.
absl::Duration BackoffFor(const RetryOptions& options, int attempt);

}  // namespace tandem

#endif  // TANDEM_COMMON_RPC_CHANNEL_H_
