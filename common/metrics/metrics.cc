#include "common/metrics/metrics.h"

#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "prometheus/text_serializer.h"

namespace tandem {
namespace {

bool IsNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9');
}

std::map<std::string, std::string> Merge(std::map<std::string, std::string> base,
                                         const std::map<std::string, std::string>& extra) {
  for (const auto& [k, v] : extra) base[k] = v;
  return base;
}

}  // namespace

absl::Status ValidateMetricName(absl::string_view name, absl::string_view kind) {
  if (!absl::StartsWith(name, "tandem_") || name.size() <= 7) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name '", name, "' must start with 'tandem_'"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric name '", name, "' must be lower snake case ([a-z_][a-z0-9_]*)"));
    }
  }
  const bool total = absl::EndsWith(name, "_total");
  if (kind == "counter" && !total) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter '", name, "' must end in '_total'"));
  }
  if (kind != "counter" && total) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, " '", name, "' must not end in '_total' (only counters do)"));
  }
  return absl::OkStatus();
}

Metrics::Metrics(const MetricsOptions& options)
    : labels_(options.labels), registry_(std::make_shared<prometheus::Registry>()) {}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const MetricsOptions& options) {
  if (options.port < -1 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics port ", options.port, " is out of range: use 0..65535, 0 = any, -1 = off"));
  }
  std::unique_ptr<Metrics> metrics(new Metrics(options));
  if (options.port >= 0) {
    Metrics* raw = metrics.get();
    ASSIGN_OR_RETURN(metrics->exposer_,
                     HttpExposer::Start(options.host, options.port, [raw] { return raw->Scrape(); }));
    metrics->port_ = metrics->exposer_->port();
  }
  return metrics;
}

namespace {

// Registers (or finds) the family `name` with the constant labels and adds
// the metric with `labels`; prometheus-cpp throws on a clash, we return it.
template <typename Metric, typename Builder, typename... Args>
absl::StatusOr<Metric*> AddMetric(Builder builder, prometheus::Registry& registry,
                                  absl::string_view kind, absl::string_view name,
                                  absl::string_view help,
                                  const std::map<std::string, std::string>& const_labels,
                                  const std::map<std::string, std::string>& labels,
                                  Args&&... args) {
  if (absl::Status s = ValidateMetricName(name, kind); !s.ok()) return s;
  try {
    auto& family = builder.Name(std::string(name))
                       .Help(std::string(help))
                       .Labels(const_labels)
                       .Register(registry);
    return &family.Add(labels, std::forward<Args>(args)...);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(kind, " '", name, "': ", e.what()));
  }
}

}  // namespace

std::map<std::string, std::string> Metrics::FreezeLabels() {
  absl::MutexLock lock(&mu_);
  registered_any_ = true;
  return labels_;
}

absl::Status Metrics::AddConstLabel(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  if (registered_any_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "constant label '", key, "' must be added before the first metric is registered"));
  }
  labels_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<prometheus::Counter*> Metrics::Counter(
    absl::string_view name, absl::string_view help,
    const std::map<std::string, std::string>& labels) {
  return AddMetric<prometheus::Counter>(prometheus::BuildCounter(), *registry_, "counter", name,
                                        help, FreezeLabels(), labels);
}

absl::StatusOr<prometheus::Gauge*> Metrics::Gauge(
    absl::string_view name, absl::string_view help,
    const std::map<std::string, std::string>& labels) {
  return AddMetric<prometheus::Gauge>(prometheus::BuildGauge(), *registry_, "gauge", name, help,
                                      FreezeLabels(), labels);
}

absl::StatusOr<prometheus::Histogram*> Metrics::Histogram(
    absl::string_view name, absl::string_view help, const std::vector<double>& bounds,
    const std::map<std::string, std::string>& labels) {
  for (size_t i = 1; i < bounds.size(); ++i) {
    if (!(bounds[i - 1] < bounds[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram '", name, "': bucket bounds must be strictly ascending"));
    }
  }
  return AddMetric<prometheus::Histogram>(prometheus::BuildHistogram(), *registry_, "histogram",
                                          name, help, FreezeLabels(), labels,
                                          prometheus::Histogram::BucketBoundaries(bounds));
}

std::string Metrics::Scrape() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

std::vector<double> Metrics::LatencyBuckets() {
  std::vector<double> b;
  for (double v = 1e-4; v < 200; v *= 3.1622776601683795) b.push_back(v);
  return b;
}

}  // namespace tandem
