#include "common/rpc/channel.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/auth.h"
#include "common/rpc/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace tandem {

std::shared_ptr<grpc::Channel> MakeChannel(const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  // Reconnect quickly after a server restart (defaults back off to 120 s).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  if (options.flow_window_bytes > 0) {
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, options.flow_window_bytes);
  }
  const TlsConfig& tls = options.tls ? *options.tls : DefaultTls();
  if (tls.enabled && !tls.server_name.empty()) {
    args.SetSslTargetNameOverride(tls.server_name);
  }
  const std::shared_ptr<grpc::ChannelCredentials> credentials = ChannelCredentials(tls);
  const std::string& token =
      options.auth_token.empty() ? DefaultAuthToken() : options.auth_token;
  if (token.empty()) {
    return grpc::CreateCustomChannel(options.target, credentials, args);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> senders;
  senders.push_back(MakeTokenSender(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.target, credentials, args, std::move(senders));
}

absl::Duration BackoffFor(const RetryOptions& options, int attempt) {
  absl::Duration d = options.initial_backoff;
  for (int i = 1; i < attempt && d < options.max_backoff; ++i) d = d * options.multiplier;
  return std::min(d, options.max_backoff);
}

absl::Status CallWithRetry(const RetryOptions& options, absl::string_view what,
                           const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  const int attempts = std::max(1, options.max_attempts);
  grpc::Status last;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         absl::ToChronoMilliseconds(options.call_timeout));
    context.set_wait_for_ready(options.wait_for_ready);
    last = call(&context);
    if (last.ok()) return absl::OkStatus();
    const bool retryable =
        last.error_code() == grpc::StatusCode::UNAVAILABLE ||
        (options.retry_deadline_exceeded &&
         last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    if (!retryable || attempt == attempts) {
      return FromGrpcStatus(last, absl::StrCat(what, " (attempt ", attempt, " of ", attempts, ")"));
    }
    absl::SleepFor(BackoffFor(options, attempt));
  }
  return FromGrpcStatus(last, what);
}

}  // namespace tandem
