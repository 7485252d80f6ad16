// Reads the Prometheus text exposition format (what every tandem process
// serves at /metrics) back into samples, for tools that inspect a job
// (`tandem doctor`) and for tests that scrape a running cluster.
//
//   ASSIGN_OR_RETURN(std::vector<PromSample> s, ParsePromText(body));
//   double v = SumOf(s, "tandem_step_phase_seconds_total", {{"phase", "comm_wait"}});
//
// Handles `name value`, `name{k="v",...} value` with escaped label values,
// optional timestamps, and skips `#` comment / HELP / TYPE lines. Values:
// numbers, +Inf, -Inf, NaN. Thread-safe (pure functions). A malformed line
// is INVALID_ARGUMENT naming the line number.
#ifndef TANDEM_COMMON_METRICS_PROM_TEXT_H_
#define TANDEM_COMMON_METRICS_PROM_TEXT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

absl::StatusOr<std::vector<PromSample>> ParsePromText(absl::string_view text);

// Sum of the values of `name` whose labels include every pair of `match`
// (0 when none do).
double SumOf(const std::vector<PromSample>& samples, const std::string& name,
             const std::map<std::string, std::string>& match = {});

// The first sample called `name` matching `match`, if any.
std::optional<PromSample> FindSample(const std::vector<PromSample>& samples,
                                     const std::string& name,
                                     const std::map<std::string, std::string>& match = {});

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_PROM_TEXT_H_
