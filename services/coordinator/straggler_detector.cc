#include "services/coordinator/straggler_detector.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

absl::Status ValidateStragglerOptions(const StragglerOptions& o) {
  if (!(o.threshold > 0) || !std::isfinite(o.threshold)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler_threshold is ", o.threshold,
        ": it must be a positive fraction (0.25 names a rank 25% slower than the median)"));
  }
  if (o.window < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--straggler_window is ", o.window, ": it must be at least 1 report (heartbeat)"));
  }
  if (o.clear_threshold >= o.threshold) {
    return absl::InvalidArgumentError(
        "the straggler clear threshold must be below the threshold (or < 0: half of it)");
  }
  return absl::OkStatus();
}

std::string FormatStraggler(const v1::Straggler& s) {
  return absl::StrFormat(
      "straggler: rank %d (%s) is %.0f%% slower than the median for %d steps: %s (%.1f ms/step "
      "against %.1f)",
      s.rank(), s.worker_id(), 100 * s.slower_fraction(), static_cast<long long>(s.steps()),
      s.cause(), 1e3 * s.step_seconds(), 1e3 * s.median_step_seconds());
}

StragglerDetector::StragglerDetector(StragglerOptions options)
    : o_(std::move(options)),
      clear_threshold_(o_.clear_threshold >= 0 ? o_.clear_threshold : o_.threshold / 2) {}

std::optional<StragglerDetector::Judgement> StragglerDetector::Judge(int rank,
                                                                     absl::Time now) const {
  std::vector<std::pair<int, const PerStep*>> fresh;
  double latest_arrival = 0;
  for (const auto& [r, st] : ranks_) {
    if (r != rank && now - st.reported_at > o_.stale_after) continue;
    fresh.emplace_back(r, &st.last);
    latest_arrival = std::max(latest_arrival, st.last.arrival());
  }
  if (fresh.size() < 2) return std::nullopt;
  // The rank's own network time: exposed communication minus its wait for
  // the latest rank to arrive (see the header).
  auto network = [&](const PerStep& p) {
    return std::max(0.0, p.comm - (latest_arrival - p.arrival()));
  };
  std::vector<double> own, compute, data, net;
  const PerStep* mine = nullptr;
  for (const auto& [r, p] : fresh) {
    if (r == rank) {
      mine = p;
      continue;
    }
    compute.push_back(p->compute);
    data.push_back(p->data);
    net.push_back(network(*p));
    own.push_back(p->compute + p->data + network(*p));
  }
  Judgement j;
  j.own = mine->compute + mine->data + network(*mine);
  j.median = Median(own);
  // The component with the largest excess over the others' median.
  const std::pair<double, const char*> parts[3] = {
      {mine->compute - Median(compute), "compute"},
      {mine->data - Median(data), "data"},
      {network(*mine) - Median(net), "network"}};
  j.cause = std::max_element(std::begin(parts), std::end(parts),
                             [](const auto& a, const auto& b) { return a.first < b.first; })
                ->second;
  return j;
}

std::optional<StragglerEvent> StragglerDetector::Report(int rank, const std::string& worker_id,
                                                        const v1::StepTiming& t) {
  if (t.steps() <= 0) return std::nullopt;
  const absl::Time now = o_.clock();
  absl::MutexLock lock(&mu_);
  RankState& st = ranks_[rank];
  st.worker_id = worker_id;
  const double n = static_cast<double>(t.steps());
  st.last = PerStep{t.compute_seconds() / n, t.data_wait_seconds() / n, t.comm_seconds() / n,
                    t.other_seconds() / n};
  st.reported_at = now;
  std::optional<Judgement> j = Judge(rank, now);
  if (!j.has_value() || j->median <= 0) return std::nullopt;
  j->excess = j->own / j->median - 1;
  j->slow = j->excess >= o_.threshold &&
            j->own - j->median >= absl::ToDoubleSeconds(o_.min_excess);
  if (st.named) return WhileNamed(rank, st, *j, t.steps());
  return WhileNotNamed(rank, st, *j, t.steps(), now);
}

void StragglerDetector::SetNumbers(const Judgement& j, v1::Straggler* v) {
  v->set_slower_fraction(j.excess);
  v->set_cause(j.cause);
  v->set_step_seconds(j.own);
  v->set_median_step_seconds(j.median);
}

std::optional<StragglerEvent> StragglerDetector::WhileNamed(int rank, RankState& st,
                                                            const Judgement& j, int64_t steps) {
  v1::Straggler& v = st.verdict;
  v.set_steps(v.steps() + steps);
  if (j.excess >= clear_threshold_) {
    st.recovered_reports = 0;
    if (j.slow) SetNumbers(j, &v);  // still slow: keep the verdict current
    return std::nullopt;
  }
  if (++st.recovered_reports < o_.window) return std::nullopt;
  st.named = false;
  st.recovered_reports = 0;
  StragglerEvent e;
  e.named = false;
  e.straggler = v;
  e.line = absl::StrFormat(
      "straggler cleared: rank %d (%s) is back within %.0f%% of the median (%.1f ms/step "
      "against %.1f)",
      rank, st.worker_id, 100 * clear_threshold_, 1e3 * j.own, 1e3 * j.median);
  return e;
}

std::optional<StragglerEvent> StragglerDetector::WhileNotNamed(int rank, RankState& st,
                                                               const Judgement& j, int64_t steps,
                                                               absl::Time now) {
  if (!j.slow) {
    st.slow_reports = 0;
    st.slow_steps = 0;
    return std::nullopt;
  }
  st.slow_steps += steps;
  if (++st.slow_reports < o_.window) return std::nullopt;
  st.named = true;
  st.slow_reports = 0;
  v1::Straggler& v = st.verdict;
  v.Clear();
  v.set_rank(rank);
  v.set_worker_id(st.worker_id);
  v.set_steps(st.slow_steps);
  v.set_since_unix_millis(absl::ToUnixMillis(now));
  SetNumbers(j, &v);
  st.slow_steps = 0;
  return StragglerEvent{true, v, FormatStraggler(v)};
}

std::vector<v1::Straggler> StragglerDetector::Named() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Straggler> out;
  for (const auto& [r, st] : ranks_) {
    if (!st.named) continue;
    out.push_back(st.verdict);
    out.back().set_message(FormatStraggler(st.verdict));
  }
  return out;
}

std::vector<int> StragglerDetector::Ranks() const {
  absl::MutexLock lock(&mu_);
  std::vector<int> out;
  for (const auto& [r, st] : ranks_) out.push_back(r);
  return out;
}

void StragglerDetector::Reset() {
  absl::MutexLock lock(&mu_);
  ranks_.clear();
}

}  // namespace tandem
