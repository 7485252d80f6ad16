#include "services/coordinator/coordinator_server.h"

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorServerOptions& options) {
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer());
  CoordinatorOptions core_options = options.coordinator;
  if (options.run_liveness_thread && core_options.stall_gap == absl::ZeroDuration()) {
    // The loop below ticks four times per period: a whole period without a
    // tick means this process, not its workers, was silent.
    core_options.stall_gap = core_options.heartbeat_period;
  }
  ASSIGN_OR_RETURN(s->core_, CoordinatorCore::Create(core_options));
  MetricsOptions metrics = options.metrics;
  metrics.labels.emplace("service", "coordinator");
  metrics.labels.emplace("job", options.coordinator.job_id);
  ASSIGN_OR_RETURN(s->metrics_, Metrics::Create(metrics));
  ASSIGN_OR_RETURN(s->generation_gauge_,
                   s->metrics_->Gauge("tandem_coordinator_generation",
                                      "Current membership generation of the job."));
  ASSIGN_OR_RETURN(s->live_workers_gauge_,
                   s->metrics_->Gauge("tandem_live_workers",
                                      "Workers in the running generation."));
  // A gauge, not a counter: it is restored from the state directory when
  // the coordinator restarts, so it can be set rather than only increased.
  ASSIGN_OR_RETURN(s->restarts_gauge_,
                   s->metrics_->Gauge("tandem_job_restarts",
                                      "Generations ended by a failure since the job began."));
  if (options.coordinator.batch_auto.max_global_batch > 0) {
    ASSIGN_OR_RETURN(s->batch_gauge_,
                     s->metrics_->Gauge("tandem_batch_global_size",
                                        "Dynamic batch sizing: the chosen global batch."));
    ASSIGN_OR_RETURN(s->noise_gauge_,
                     s->metrics_->Gauge("tandem_batch_noise_scale",
                                        "Dynamic batch sizing: gradient noise scale estimate "
                                        "(-1 while unknown)."));
    ASSIGN_OR_RETURN(s->efficiency_gauge_,
                     s->metrics_->Gauge("tandem_batch_efficiency",
                                        "Dynamic batch sizing: statistical efficiency of the "
                                        "chosen batch against the reference batch."));
    ASSIGN_OR_RETURN(s->goodput_gauge_,
                     s->metrics_->Gauge("tandem_batch_goodput_samples_per_second",
                                        "Dynamic batch sizing: predicted goodput of the choice."));
  }
  s->service_ = std::make_unique<CoordinatorService>(s->core_.get(), options.max_join_wait,
                                                    options.auth_token);
  ASSIGN_OR_RETURN(s->rpc_, RpcServer::Start(options.rpc, {s->service_.get()}));
  s->UpdateGauges();
  if (options.run_liveness_thread) {
    // Check several times per period so a dead worker is noticed within a
    // fraction of a period after its deadline.
    const absl::Duration interval = options.coordinator.heartbeat_period / 4;
    s->liveness_ = std::thread([raw = s.get(), interval] { raw->LivenessLoop(interval); });
  }
  return s;
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

void CoordinatorServer::Shutdown() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (liveness_.joinable()) liveness_.join();
  if (service_) service_->Stop();  // Attach calls end without a detach
  if (rpc_) rpc_->Shutdown();
}

void CoordinatorServer::LivenessLoop(absl::Duration interval) {
  while (!stop_.WaitForNotificationWithTimeout(interval)) {
    core_->CheckLiveness();
    UpdateGauges();
  }
}

void CoordinatorServer::UpdateGauges() {
  generation_gauge_->Set(static_cast<double>(core_->generation()));
  live_workers_gauge_->Set(core_->live_workers());
  restarts_gauge_->Set(static_cast<double>(core_->restarts()));
  if (batch_gauge_ != nullptr) {
    const BatchDecision d = core_->batch_decision();
    batch_gauge_->Set(static_cast<double>(d.global_batch));
    noise_gauge_->Set(d.noise_scale);
    efficiency_gauge_->Set(d.efficiency);
    goodput_gauge_->Set(d.goodput);
  }
  UpdateStragglerGauges();
}

void CoordinatorServer::UpdateStragglerGauges() {
  static constexpr const char* kCauses[3] = {"compute", "data", "network"};
  for (int rank : core_->timed_ranks()) {
    if (straggler_gauges_.count(rank) > 0) continue;
    std::array<prometheus::Gauge*, 3>& g = straggler_gauges_[rank];
    for (int c = 0; c < 3; ++c) {
      absl::StatusOr<prometheus::Gauge*> made = metrics_->Gauge(
          "tandem_straggler",
          "1 while the coordinator names this rank a straggler for this cause (compute, data, "
          "network), else 0.",
          {{"rank", absl::StrCat(rank)}, {"cause", kCauses[c]}});
      g[c] = made.ok() ? *made : nullptr;
    }
  }
  std::map<int, std::string> named;
  for (const v1::Straggler& s : core_->stragglers()) named[s.rank()] = s.cause();
  for (auto& [rank, gauges] : straggler_gauges_) {
    auto it = named.find(rank);
    for (int c = 0; c < 3; ++c) {
      if (gauges[c] != nullptr) gauges[c]->Set(it != named.end() && it->second == kCauses[c]);
    }
  }
}

}  // namespace tandem
