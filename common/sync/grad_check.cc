#include "common/sync/grad_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {
namespace {

// The highest index of `ranges` whose part inside `owned` has a non-finite
// sum of squares; -1 for none.
absl::StatusOr<int> LastNonFiniteRange(
    optim::ParamRange owned, absl::Span<const std::pair<int64_t, int64_t>> ranges,
    absl::FunctionRef<absl::StatusOr<double>(int64_t, int64_t)> sum_sq) {
  for (int i = static_cast<int>(ranges.size()) - 1; i >= 0; --i) {
    const int64_t lo = std::max(ranges[i].first, owned.lo);
    const int64_t hi = std::min(ranges[i].second, owned.hi);
    if (lo >= hi) continue;
    ASSIGN_OR_RETURN(double s, sum_sq(lo, hi));
    if (!std::isfinite(s)) return i;
  }
  return -1;
}

}  // namespace

absl::StatusOr<GradCheck> CheckGradients(
    GradClip& clip, const StepOptions& options, double scale, optim::ParamRange owned,
    absl::Span<const std::pair<int64_t, int64_t>> ranges,
    absl::FunctionRef<absl::StatusOr<double>(int64_t lo, int64_t hi)> sum_sq) {
  GradCheck c;
  if (!clip.enabled() && !options.skip_non_finite && !options.measure_grad_norm) return c;
  double local = 0;
  if (owned.size() > 0) {
    ASSIGN_OR_RETURN(local, sum_sq(owned.lo, owned.hi));
  }
  int bad = -1;
  if (!std::isfinite(local) && options.skip_non_finite) {
    ASSIGN_OR_RETURN(bad, LastNonFiniteRange(owned, ranges, sum_sq));
    // A non-finite total over a finite set of ranges cannot happen, but a
    // tag of -1 would read as "all finite" to the other shards.
    if (bad < 0) bad = 0;
  }
  ASSIGN_OR_RETURN(GradClip::Totals t, clip.Combine(local, bad));
  c.report.grad_sum_sq = t.sum_sq;
  if (!std::isfinite(t.sum_sq)) {
    if (options.skip_non_finite) {
      c.report.applied = false;
      c.report.first_non_finite_range = static_cast<int>(t.max_tag);
      return c;
    }
    if (!clip.enabled()) return c;
  }
  ASSIGN_OR_RETURN(optim::ClipResult r, clip.ClipFromTotal(t.sum_sq, scale));
  c.clip_scale = r.scale;
  return c;
}

}  // namespace sync
}  // namespace tandem
