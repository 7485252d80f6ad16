#include "services/shardserver/shard_server.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace shardserver {
namespace {

double CounterValue(const prometheus::Counter* c) { return c == nullptr ? 0 : c->Value(); }

// A server bound to every interface reports this host's name instead of
// 0.0.0.0 (what `tandem status` shows must be dialable).
std::string AdvertisedAddress(const std::string& bound) {
  const size_t colon = bound.rfind(':');
  const std::string host = bound.substr(0, colon);
  if (host != "0.0.0.0" && host != "[::]" && host != "::") return bound;
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == 0) return bound;
  return absl::StrCat(name, bound.substr(colon));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardServer>> ShardServer::Start(
    const ShardServerOptions& options) {
  if (options.report_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shard server: report_period must be >= 0");
  }
  std::unique_ptr<ShardServer> server(new ShardServer());
  server->options_ = options;
  MetricsOptions mo;
  mo.port = options.metrics_port;
  mo.labels = {{"service", "shardserver"}};
  if (!options.server_id.empty()) mo.labels["server"] = options.server_id;
  ASSIGN_OR_RETURN(server->metrics_, Metrics::Create(mo));
  ASSIGN_OR_RETURN(server->shard_metrics_, ShardMetrics::Create(server->metrics_.get()));
  server->store_ =
      std::make_unique<RangeStore>(&server->shard_metrics_, options.apply_threads);
  server->replicator_ = std::make_unique<Replicator>(
      server->store_.get(), ReplicatorOptions{.auth_token = options.auth_token});
  server->store_->SetForwarder(server->replicator_.get());
  server->service_ = std::make_unique<ShardService>(server->store_.get(), &server->shard_metrics_,
                                                   options.auth_token, &server->replica_);
  ServerOptions ro;
  ro.host = options.host;
  ro.port = options.port;
  ro.flow_window_bytes = options.flow_window_bytes;
  ro.max_idle_threads = options.max_idle_threads;
  ASSIGN_OR_RETURN(server->rpc_, RpcServer::Start(ro, {server->service_.get()}));
  if (server->options_.server_id.empty()) {
    server->options_.server_id = absl::StrCat("shard@", server->address());
  }
  if (!options.coordinator.empty()) {
    ChannelOptions co;
    co.target = options.coordinator;
    co.auth_token = options.auth_token;
    server->coordinator_ = v1::Coordinator::NewStub(MakeChannel(co));
    if (options.report_period > absl::ZeroDuration()) {
      ShardServer* s = server.get();
      server->reporter_ = std::thread([s] { s->ReportLoop(); });
    }
  }
  return server;
}

void ShardServer::Shutdown() {
  {
    absl::MutexLock lock(&report_mu_);
    stop_reports_ = true;
    report_cv_.SignalAll();
  }
  if (reporter_.joinable()) reporter_.join();
  rpc_->Shutdown();
}

ShardServer::~ShardServer() {
  {
    absl::MutexLock lock(&report_mu_);
    stop_reports_ = true;
    report_cv_.SignalAll();
  }
  if (reporter_.joinable()) reporter_.join();
  if (rpc_ != nullptr) rpc_->Shutdown();
  if (replicator_ != nullptr) replicator_->Stop();
}

v1::ShardServerStatus ShardServer::Report() const {
  const StoreInfo i = store_->info();
  v1::ShardServerStatus r;
  r.set_server_id(options_.server_id);
  r.set_address(AdvertisedAddress(rpc_->address()));
  if (i.generation > 0) {
    v1::FlatRange* range = r.add_ranges();
    range->set_begin(i.range.lo);
    range->set_end(i.range.hi);
  }
  r.set_bytes_served(static_cast<int64_t>(CounterValue(shard_metrics_.push_bytes) +
                                          CounterValue(shard_metrics_.pull_bytes)));
  r.set_steps_applied(static_cast<int64_t>(CounterValue(shard_metrics_.steps_applied)));
  r.set_generation(i.generation);
  r.set_step(i.step);
  return r;
}

absl::Status ShardServer::ReportNow() {
  if (coordinator_ == nullptr) {
    return absl::FailedPreconditionError("shard server: no coordinator to report to");
  }
  v1::ReportShardServerRequest req;
  req.mutable_job()->set_job_id(options_.job_id);
  *req.mutable_server() = Report();
  v1::ReportShardServerResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::Status s = coordinator_->ReportShardServer(&ctx, req, &resp);
  if (!s.ok()) {
    return FromGrpcStatus(s, absl::StrCat("Coordinator.ReportShardServer to ",
                                          options_.coordinator));
  }
  return absl::OkStatus();
}

void ShardServer::ReportLoop() {
  bool warned = false;
  for (;;) {
    absl::Status s = ReportNow();
    if (!s.ok() && !warned) {
      LOG(WARNING) << "shard server " << options_.server_id << ": " << s
                   << " (retrying every " << options_.report_period << ")";
    }
    warned = !s.ok();
    absl::MutexLock lock(&report_mu_);
    const absl::Time until = absl::Now() + options_.report_period;
    while (!stop_reports_ && absl::Now() < until) report_cv_.WaitWithDeadline(&report_mu_, until);
    if (stop_reports_) return;
  }
}

}  // namespace shardserver
}  // namespace tandem
