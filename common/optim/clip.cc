#include "common/optim/clip.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace optim {

namespace {

// Eight independent lanes (a[j] sums elements j mod 8): GCC vectorises the
// lane loop without reassociating anything, so the result is the same for
// every vector width; the lanes are combined in a fixed tree. Squares of
// fp32 values are exact in double, so contraction into FMA changes nothing.
TANDEM_CPU_INLINE void SumOfSquaresBody(const float* __restrict g, int64_t n, double* out) {
  double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const double x = g[i + j];
      a[j] += x * x;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const double x = g[i];
    a[j] += x * x;
  }
  *out = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
TANDEM_CPU_DISPATCHED(SumOfSquares, (const float* __restrict g, int64_t n, double* out),
                      (g, n, out))

}  // namespace

double PartialSumOfSquares(absl::Span<const float> grads) {
  double s = 0;
  SumOfSquares(grads.data(), static_cast<int64_t>(grads.size()), &s);
  return s;
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
