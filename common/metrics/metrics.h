// tandem's metrics: a prometheus-cpp registry with the project's naming rules
// enforced, optionally served over HTTP at /metrics.
//
//   MetricsOptions options;
//   options.port = 9100;                       // 0 = any free port, -1 = don't serve
//   options.labels = {{"job", "j1"}, {"rank", "0"}, {"service", "worker"}};
//   ASSIGN_OR_RETURN(auto metrics, Metrics::Create(options));
//   ASSIGN_OR_RETURN(prometheus::Counter * steps,
//                    metrics->Counter("tandem_steps_total", "Optimizer steps taken."));
//   steps->Increment();                         // lock-free, fine on the hot path
//
// Naming (DESIGN.md): prefix tandem_, lower snake case, base units in the
// name (_seconds, _bytes), counters end in _total and nothing else does.
// `labels` (job, rank, service) are attached to every metric; never use a
// label whose values grow per step or per sample.
//
// Thread-safe. Metric handles are owned by the registry and stay valid for
// the life of the Metrics object; get them once at start-up, not per step.
// Fails with INVALID_ARGUMENT for a bad name or a clash with an existing
// metric, UNAVAILABLE when the port cannot be bound.
#ifndef TANDEM_COMMON_METRICS_METRICS_H_
#define TANDEM_COMMON_METRICS_METRICS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/http_exposer.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem {

struct MetricsOptions {
  // Interface for /metrics; 0.0.0.0 so Prometheus in a cluster can scrape.
  std::string host = "0.0.0.0";
  // 0 = any free port (see port()); -1 = keep metrics in memory only.
  int port = -1;
  // Constant labels on every metric: job, rank, service.
  std::map<std::string, std::string> labels;
};

class Metrics {
 public:
  static absl::StatusOr<std::unique_ptr<Metrics>> Create(const MetricsOptions& options);

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  absl::StatusOr<prometheus::Counter*> Counter(absl::string_view name, absl::string_view help,
                                               const std::map<std::string, std::string>& labels = {});
  absl::StatusOr<prometheus::Gauge*> Gauge(absl::string_view name, absl::string_view help,
                                           const std::map<std::string, std::string>& labels = {});
  // `bounds` are the buckets' upper bounds, ascending.
  absl::StatusOr<prometheus::Histogram*> Histogram(
      absl::string_view name, absl::string_view help, const std::vector<double>& bounds,
      const std::map<std::string, std::string>& labels = {});

  // Adds a constant label to every metric registered from now on; allowed
  // only before the first metric is registered (FAILED_PRECONDITION after),
  // so a process can serve /metrics before it knows, say, its rank.
  absl::Status AddConstLabel(const std::string& key, const std::string& value);

  // Bound HTTP port, or -1 when not serving.
  int port() const { return port_; }
  // The text exposition format, as /metrics would serve it.
  std::string Scrape() const;

  // Buckets for step and RPC latencies: 100 us .. ~100 s, x~3.16.
  static std::vector<double> LatencyBuckets();

 private:
  explicit Metrics(const MetricsOptions& options);

  // Constant labels, frozen once the first metric is registered.
  absl::Mutex mu_;
  std::map<std::string, std::string> labels_ ABSL_GUARDED_BY(mu_);
  bool registered_any_ ABSL_GUARDED_BY(mu_) = false;
  // Marks the labels frozen and returns them.
  std::map<std::string, std::string> FreezeLabels() ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<HttpExposer> exposer_;
  int port_ = -1;
};

// Checks a metric name against the rules above; `kind` is "counter", "gauge"
// or "histogram".
absl::Status ValidateMetricName(absl::string_view name, absl::string_view kind);

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_METRICS_H_
