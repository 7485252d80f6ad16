#include "services/shardserver/shard_server.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace shardserver {

absl::StatusOr<std::unique_ptr<ShardServer>> ShardServer::Start(
    const ShardServerOptions& options) {
  std::unique_ptr<ShardServer> server(new ShardServer());
  MetricsOptions mo;
  mo.port = options.metrics_port;
  mo.labels = {{"service", "shardserver"}};
  if (!options.server_id.empty()) mo.labels["server"] = options.server_id;
  ASSIGN_OR_RETURN(server->metrics_, Metrics::Create(mo));
  ASSIGN_OR_RETURN(server->shard_metrics_, ShardMetrics::Create(server->metrics_.get()));
  server->store_ = std::make_unique<RangeStore>(&server->shard_metrics_);
  server->service_ = std::make_unique<ShardService>(server->store_.get(), &server->shard_metrics_,
                                                   options.auth_token);
  ServerOptions ro;
  ro.host = options.host;
  ro.port = options.port;
  ASSIGN_OR_RETURN(server->rpc_, RpcServer::Start(ro, {server->service_.get()}));
  return server;
}

ShardServer::~ShardServer() {
  if (rpc_ != nullptr) rpc_->Shutdown();
}

}  // namespace shardserver
}  // namespace tandem
