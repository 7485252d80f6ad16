#include "common/optim/clip.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace optim {

double PartialSumOfSquares(absl::Span<const float> grads) {
  // Four accumulators break the add dependency chain and let the compiler
  // use two-wide double vectors; they are combined in a fixed order.
  const float* g = grads.data();
  const int64_t n = static_cast<int64_t>(grads.size());
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double x0 = g[i], x1 = g[i + 1], x2 = g[i + 2], x3 = g[i + 3];
    a0 += x0 * x0;
    a1 += x1 * x1;
    a2 += x2 * x2;
    a3 += x3 * x3;
  }
  for (; i < n; ++i) {
    const double x = g[i];
    a0 += x * x;
  }
  return (a0 + a1) + (a2 + a3);
}

absl::StatusOr<ClipResult> ComputeClip(double total_sum_sq, double max_norm) {
  if (!std::isfinite(max_norm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient clipping max_norm must be finite, got ",
                     max_norm, "; use 0 to disable clipping"));
  }
  if (!std::isfinite(total_sum_sq) || total_sum_sq < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gradient global norm is not finite (sum of squares = ", total_sum_sq,
        "): gradients contain inf/NaN; lower the learning rate, or use "
        "dynamic loss scaling for fp16"));
  }
  ClipResult r;
  r.global_norm = std::sqrt(total_sum_sq);
  if (max_norm > 0 && r.global_norm > max_norm) {
    r.scale = static_cast<float>(max_norm / (r.global_norm + 1e-6));
    r.clipped = true;
  }
  return r;
}

void ScaleInPlace(absl::Span<float> grads, float scale) {
  float* __restrict g = grads.data();
  const size_t n = grads.size();
  for (size_t i = 0; i < n; ++i) g[i] = g[i] * scale;
}

}  // namespace optim
}  // namespace tandem
