#include "common/rpc/server.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "grpc/support/log.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace tandem {
namespace {

// gRPC core logs a multi-line report of a failed bind; the Status Start()
// returns says the same in one line, so gRPC's lines are dropped while a
// server is being started and passed through otherwise.
std::atomic<int> g_starting{0};

void GrpcLog(gpr_log_func_args* args) {
  if (g_starting.load() > 0) return;
  std::fprintf(stderr, "grpc %s %s:%d] %s\n", gpr_log_severity_string(args->severity), args->file,
               args->line, args->message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "port ", options.port, " is out of range: use 0..65535 (0 = any free port)"));
  }
  const std::string address = absl::StrCat(options.host, ":", options.port);
  const TlsConfig& tls = options.tls ? *options.tls : DefaultTls();
  if (tls.enabled && tls.cert_pem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS is on but this server on ", address,
        " has no certificate: give it --tls_cert and --tls_key (signed by --tls_ca)"));
  }
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(address, ServerCredentials(tls), &bound_port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  // SO_REUSEPORT would let two servers share a port silently; an occupied
  // port must be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.flow_window_bytes > 0) {
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, options.flow_window_bytes);
  }
  if (options.max_idle_threads > 0) {
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                                options.max_idle_threads);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  static std::once_flag install_log;
  std::call_once(install_log, [] { gpr_set_log_function(GrpcLog); });
  g_starting.fetch_add(1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  g_starting.fetch_sub(1);
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        ": the port is in use or the address is not local; choose another port "
        "(0 picks a free one)"));
  }
  return std::unique_ptr<RpcServer>(
      new RpcServer(std::move(server), options.host, bound_port, options.shutdown_grace));
}

RpcServer::RpcServer(std::unique_ptr<grpc::Server> server, std::string host, int port,
                     absl::Duration grace)
    : server_(std::move(server)), host_(std::move(host)), port_(port), grace_(grace) {}

RpcServer::~RpcServer() { Shutdown(); }

std::string RpcServer::address() const { return absl::StrCat(host_, ":", port_); }

void RpcServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace_));
}

void RpcServer::Wait() { server_->Wait(); }

}  // namespace tandem
