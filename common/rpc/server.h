// Starts a gRPC server on host:port (port 0 = any free port) and reports the
// port actually bound, so tests and `tandem local` never need fixed ports.
//
//   ServerOptions options;             // 127.0.0.1:0 by default
//   ASSIGN_OR_RETURN(auto server, RpcServer::Start(options, {&my_service}));
//   int port = server->port();
//   ...
//   server->Shutdown();                // also done by the destructor
//
// Ownership: the caller keeps the services alive until the server is shut
// down. Thread-safe after Start. Fails with UNAVAILABLE (port in use, address
// not local) or INVALID_ARGUMENT (bad port), with a message naming the
// address and what to change.
#ifndef TANDEM_COMMON_RPC_SERVER_H_
#define TANDEM_COMMON_RPC_SERVER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/tls.h"
#include "grpcpp/server.h"
#include "grpcpp/impl/codegen/service_type.h"

namespace tandem {

struct ServerOptions {
  // Interface to bind; "0.0.0.0" to accept remote workers.
  std::string host = "127.0.0.1";
  // 0 picks a free port; see RpcServer::port().
  int port = 0;
  // Largest message accepted or sent (batches and tensor chunks are large).
  int max_message_bytes = 256 << 20;
  // Grace period for in-flight calls on Shutdown().
  absl::Duration shutdown_grace = absl::Seconds(2);
  // TLS settings; unset = the process default (DefaultTls()).
  std::optional<TlsConfig> tls;
  // > 0: a fixed HTTP/2 receive window per stream (see ChannelOptions).
  int flow_window_bytes = 0;
  // > 0: how many idle handler threads gRPC's sync server keeps waiting
  // for calls (its default: 2). A thread that ends a call while that many
  // others already wait exits, and a later call starts a new one, so a
  // server taking many short calls at once (a shard server's per-chunk
  // pulls) would create and end a thread per call.
  int max_idle_threads = 0;
};

class RpcServer {
 public:
  static absl::StatusOr<std::unique_ptr<RpcServer>> Start(
      const ServerOptions& options, const std::vector<grpc::Service*>& services);

  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  int port() const { return port_; }
  // "host:port" as bound, for logs and for clients on this machine.
  std::string address() const;

  // Stops accepting calls, waits up to the grace period, then cancels the
  // rest. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() has been called (from another thread).
  void Wait();

 private:
  RpcServer(std::unique_ptr<grpc::Server> server, std::string host, int port,
            absl::Duration grace);

  std::unique_ptr<grpc::Server> server_;
  std::string host_;
  int port_;
  absl::Duration grace_;
  bool shut_down_ = false;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_RPC_SERVER_H_
