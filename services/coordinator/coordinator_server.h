// CoordinatorServer: a running coordinator process minus flag parsing. Owns
// the core, its gRPC service and server, the /metrics endpoint and the
// liveness thread that ends a generation when a worker falls silent.
//
//   CoordinatorServerOptions options;             // defaults: 127.0.0.1:0
//   ASSIGN_OR_RETURN(auto server, CoordinatorServer::Start(options));
//   server->port();  server->Wait();
//
// Thread-safe. Start fails with a Status naming the bad option, the
// occupied port or the unreadable state directory.
#ifndef TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVER_H_
#define TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVER_H_

#include <array>
#include <map>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/metrics/metrics.h"
#include "common/rpc/server.h"
#include "services/coordinator/coordinator_core.h"
#include "services/coordinator/coordinator_service.h"

namespace tandem {

struct CoordinatorServerOptions {
  CoordinatorOptions coordinator;
  ServerOptions rpc;
  MetricsOptions metrics;  // port -1 = no /metrics
  // How long one Join may wait for the rendezvous.
  absl::Duration max_join_wait = absl::Minutes(10);
  // The job's token every call must carry (common/rpc/auth.h); "" = none.
  std::string auth_token;
  // False in tests that step CoordinatorCore::CheckLiveness by hand.
  bool run_liveness_thread = true;
};

class CoordinatorServer {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const CoordinatorServerOptions& options);
  ~CoordinatorServer();

  int port() const { return rpc_->port(); }
  int metrics_port() const { return metrics_->port(); }
  CoordinatorCore& core() { return *core_; }

  // Stops the liveness thread and the gRPC server. Idempotent.
  void Shutdown();
  void Wait() { rpc_->Wait(); }

 private:
  CoordinatorServer() = default;
  void LivenessLoop(absl::Duration interval);
  void UpdateGauges();

  std::unique_ptr<CoordinatorCore> core_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<RpcServer> rpc_;
  std::unique_ptr<Metrics> metrics_;
  prometheus::Gauge* generation_gauge_ = nullptr;
  prometheus::Gauge* live_workers_gauge_ = nullptr;
  prometheus::Gauge* restarts_gauge_ = nullptr;
  // Dynamic batch sizing (--batch_auto only; null otherwise).
  prometheus::Gauge* batch_gauge_ = nullptr;
  prometheus::Gauge* noise_gauge_ = nullptr;
  prometheus::Gauge* efficiency_gauge_ = nullptr;
  prometheus::Gauge* goodput_gauge_ = nullptr;
  // tandem_straggler{rank, cause}: per rank that reported step times, one
  // series per cause (compute, data, network); 1 for the named rank's
  // cause, else 0. Made when a rank first reports (liveness thread only).
  std::map<int, std::array<prometheus::Gauge*, 3>> straggler_gauges_;
  void UpdateStragglerGauges();
  absl::Notification stop_;
  std::thread liveness_;
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_COORDINATOR_SERVER_H_
