#include "common/sync/bucket/bucket_readiness.h"

#include <algorithm>

namespace tandem {
namespace sync {
namespace {

std::vector<std::pair<int64_t, int>> SortedByLo(const BucketReadiness::Ranges& ranges) {
  std::vector<std::pair<int64_t, int>> by_lo;
  by_lo.reserve(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    by_lo.push_back({ranges[i].first, static_cast<int>(i)});
  }
  std::sort(by_lo.begin(), by_lo.end());
  return by_lo;
}

}  // namespace

BucketReadiness BucketReadiness::ForPlan(const BucketPlan& plan, Ranges ranges) {
  Ranges units;
  units.reserve(plan.buckets.size());
  for (const Bucket& b : plan.buckets) units.push_back({b.lo, b.hi});
  return BucketReadiness(std::move(units), Order::kPlan, std::move(ranges));
}

BucketReadiness BucketReadiness::ForUnits(Ranges units) {
  return BucketReadiness(std::move(units), Order::kAsReady, {});
}

BucketReadiness BucketReadiness::ForUnitsInOrder(Ranges units) {
  return BucketReadiness(std::move(units), Order::kPlan, {});
}

BucketReadiness::BucketReadiness(Ranges units, Order order, Ranges expected_ranges)
    : units_(std::move(units)),
      order_(order),
      expected_(std::move(expected_ranges)),
      units_by_lo_(SortedByLo(units_)),
      expected_by_lo_(SortedByLo(expected_)),
      remaining_(units_.size(), 0),
      complete_(units_.size(), 0),
      reported_(expected_.size(), 0) {
  Reset();
}

void BucketReadiness::Reset() {
  for (size_t u = 0; u < units_.size(); ++u) remaining_[u] = units_[u].second - units_[u].first;
  std::fill(complete_.begin(), complete_.end(), 0);
  std::fill(reported_.begin(), reported_.end(), 0);
  next_unit_ = 0;
  emitted_count_ = 0;
  completed_count_ = 0;
  ranges_reported_ = 0;
  next_expected_ = 0;
  over_reported_ = 0;
}

BucketReadiness::Outcome BucketReadiness::Report(int64_t lo, int64_t hi,
                                                 absl::FunctionRef<void(int)> on_ready) {
  if (!expected_.empty()) {
    const int r = FindExpectedRange(lo, hi);
    if (r < 0) return Outcome::kUnknownRange;
    if (reported_[r]) return Outcome::kRepeatedRange;
    reported_[r] = 1;
    next_expected_ = r + 1;
  }
  ++ranges_reported_;
  Subtract(lo, hi, on_ready);
  return Outcome::kCounted;
}

// The index of expected range [lo, hi), or -1.
int BucketReadiness::FindExpectedRange(int64_t lo, int64_t hi) const {
  const int n = static_cast<int>(expected_.size());
  if (next_expected_ < n && expected_[next_expected_] == std::make_pair(lo, hi)) {
    return next_expected_;
  }
  auto it = std::lower_bound(expected_by_lo_.begin(), expected_by_lo_.end(),
                             std::pair<int64_t, int>{lo, -1});
  for (; it != expected_by_lo_.end() && it->first == lo; ++it) {
    if (expected_[it->second].second == hi) return it->second;
  }
  return -1;
}

// Takes [lo, hi)'s overlap off every unit it touches; emits what completes.
void BucketReadiness::Subtract(int64_t lo, int64_t hi, absl::FunctionRef<void(int)> on_ready) {
  if (hi <= lo) return;
  auto it = std::upper_bound(units_by_lo_.begin(), units_by_lo_.end(),
                             std::pair<int64_t, int>{lo, size()});
  if (it != units_by_lo_.begin()) --it;
  for (; it != units_by_lo_.end() && it->first < hi; ++it) {
    const int u = it->second;
    const int64_t a = std::max(lo, units_[u].first), b = std::min(hi, units_[u].second);
    if (b <= a) continue;
    remaining_[u] -= b - a;
    if (remaining_[u] < 0) {
      ++over_reported_;
    } else if (remaining_[u] == 0) {
      complete_[u] = 1;
      ++completed_count_;
      if (order_ == Order::kAsReady) {
        ++emitted_count_;
        on_ready(u);
      }
    }
  }
  if (order_ != Order::kPlan) return;
  while (next_unit_ < size() && complete_[next_unit_]) {
    ++emitted_count_;
    on_ready(next_unit_++);
  }
}

}  // namespace sync
}  // namespace tandem
