#include "common/sync/bucket/bucket_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace sync {

absl::StatusOr<BucketPlan> PlanBuckets(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                       int64_t size, int64_t cap_bytes) {
  if (cap_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket cap must be positive, got ", cap_bytes, " bytes"));
  }
  if (size < 0) return absl::InvalidArgumentError(absl::StrCat("negative size ", size));
  // The ranges must tile [0, size): sorted by lo, each starts where the
  // previous one ends, none empty.
  std::vector<std::pair<int64_t, int64_t>> sorted = ranges;
  std::sort(sorted.begin(), sorted.end());
  int64_t expect = 0;
  for (const auto& [lo, hi] : sorted) {
    if (lo != expect || hi <= lo) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient ranges must tile [0, ", size, ") exactly once with non-empty ranges; ",
          "found [", lo, ", ", hi, ") where a range starting at ", expect,
          " was expected (pass nn::GroupRanges(model->layout()))"));
    }
    expect = hi;
  }
  if (expect != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient ranges cover [0, ", expect, ") but the buffer has ", size, " elements"));
  }

  const int64_t cap = std::max<int64_t>(1, cap_bytes / static_cast<int64_t>(sizeof(float)));
  BucketPlan plan;
  plan.bucket_of_range.resize(ranges.size());
  for (int i = 0; i < static_cast<int>(ranges.size()); ++i) {
    const auto [lo, hi] = ranges[i];
    if (!plan.buckets.empty()) {
      Bucket& b = plan.buckets.back();
      const bool adjacent = lo == b.hi || hi == b.lo;
      if (adjacent && b.size() + (hi - lo) <= cap) {
        b.lo = std::min(b.lo, lo);
        b.hi = std::max(b.hi, hi);
        b.end_range = i + 1;
        plan.bucket_of_range[i] = static_cast<int>(plan.buckets.size()) - 1;
        continue;
      }
    }
    plan.buckets.push_back(Bucket{lo, hi, i, i + 1});
    plan.bucket_of_range[i] = static_cast<int>(plan.buckets.size()) - 1;
  }
  return plan;
}

}  // namespace sync
}  // namespace tandem
