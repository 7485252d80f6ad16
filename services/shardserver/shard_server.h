// The shard-server process as a library: metrics exposer, range store and
// gRPC service. main.cc only fills the Options; tests run the same server
// in-process on port 0.
//
//   ShardServerOptions options;                 // 127.0.0.1:0, no /metrics
//   ASSIGN_OR_RETURN(auto server, ShardServer::Start(options));
//   std::string address = server->address();    // "127.0.0.1:PORT"
//   server->Wait();
//
// The server starts empty: the job's rank 0 sends InitShard with the range,
// chunk layout and optimizer it should hold (common/shard/shard_layout.h).
// Thread-safe after Start. Start fails with UNAVAILABLE when a port is taken,
// INVALID_ARGUMENT for bad options.
#ifndef TANDEM_SERVICES_SHARDSERVER_SHARD_SERVER_H_
#define TANDEM_SERVICES_SHARDSERVER_SHARD_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"
#include "common/rpc/server.h"
#include "services/shardserver/range_store.h"
#include "services/shardserver/shard_metrics.h"
#include "services/shardserver/shard_service.h"

namespace tandem {
namespace shardserver {

struct ShardServerOptions {
  std::string host = "127.0.0.1";  // "0.0.0.0" to serve other machines
  int port = 0;                    // 0 = any free port
  int metrics_port = -1;           // -1 = no /metrics; 0 = any free port
  std::string server_id;           // label on the metrics ("" = none)
  std::string auth_token;          // the job's token every call must carry ("" = none)
};

class ShardServer {
 public:
  static absl::StatusOr<std::unique_ptr<ShardServer>> Start(const ShardServerOptions& options);
  ~ShardServer();

  int port() const { return rpc_->port(); }
  std::string address() const { return rpc_->address(); }
  int metrics_port() const { return metrics_->port(); }
  Metrics* metrics() { return metrics_.get(); }
  RangeStore* store() { return store_.get(); }

  void Shutdown() { rpc_->Shutdown(); }
  void Wait() { rpc_->Wait(); }

 private:
  ShardServer() = default;

  std::unique_ptr<Metrics> metrics_;
  ShardMetrics shard_metrics_;
  std::unique_ptr<RangeStore> store_;
  std::unique_ptr<ShardService> service_;
  std::unique_ptr<RpcServer> rpc_;  // declared last: stops first
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_SHARD_SERVER_H_
