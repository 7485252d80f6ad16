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
// With options.coordinator set it reports itself there (ReportShardServer:
// id, address, ranges, bytes served, steps applied) at Start and then
// every report_period on a background thread (report_period 0: only when
// ReportNow is called, as tests do); a report that fails is logged and
// retried at the next period, never fatal.
// Thread-safe after Start. Start fails with UNAVAILABLE when a port is taken,
// INVALID_ARGUMENT for bad options.
#ifndef TANDEM_SERVICES_SHARDSERVER_SHARD_SERVER_H_
#define TANDEM_SERVICES_SHARDSERVER_SHARD_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "common/rpc/server.h"
#include "proto/coordinator.grpc.pb.h"
#include "services/shardserver/range_store.h"
#include "services/shardserver/replica_store.h"
#include "services/shardserver/replicator.h"
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
  // Coordinator to report to, host:port ("" = none), for this job id.
  std::string coordinator;
  std::string job_id;
  absl::Duration report_period = absl::Seconds(2);  // 0 = no background reports
  // Threads that run the optimizer steps of completed chunks, off the
  // receive path (range_store.h); 0 = on the push's own thread.
  int apply_threads = 2;
  // A fixed HTTP/2 window per stream for pushes coming in (0 = gRPC's
  // auto-tuned one, which grows with a congested link's queueing delay):
  // a worker's push stream then waits for the link, so the order it pushes
  // in holds on the wire (common/shard/remote_shards.h).
  int flow_window_bytes = 64 << 10;
  // Idle gRPC handler threads kept for the next calls (ServerOptions::
  // max_idle_threads): every pull is a call of its own, and with gRPC's
  // default of 2 the server started and ended a thread for most of them
  // (~30% of its CPU per chunk, tools/bench/ps_chunk_bench). Enough for
  // every push stream and pull in flight at once keeps them all.
  int max_idle_threads = 64;
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

  void Shutdown();
  void Wait() { rpc_->Wait(); }

  // What a report carries now.
  v1::ShardServerStatus Report() const;
  // Sends one report to options.coordinator (FAILED_PRECONDITION without
  // one; the RPC's error otherwise).
  absl::Status ReportNow();

 private:
  ShardServer() = default;
  void ReportLoop();

  ShardServerOptions options_;
  std::unique_ptr<v1::Coordinator::Stub> coordinator_;
  absl::Mutex report_mu_;
  absl::CondVar report_cv_;
  bool stop_reports_ ABSL_GUARDED_BY(report_mu_) = false;
  std::thread reporter_;

  std::unique_ptr<Metrics> metrics_;
  ShardMetrics shard_metrics_;
  // Sends this range to its replica. Stopped first (the destructor), freed
  // after the store, whose apply threads may still call it (a no-op then).
  std::unique_ptr<Replicator> replicator_;
  ReplicaStore replica_;  // the neighbour's range (range replication)
  std::unique_ptr<RangeStore> store_;
  std::unique_ptr<ShardService> service_;
  std::unique_ptr<RpcServer> rpc_;  // declared last: stops first
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_SHARD_SERVER_H_
