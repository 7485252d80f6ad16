#include "common/optim/clip.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/numeric/cpu_dispatch.h"
#include "common/numeric/square_lanes.h"

namespace tandem {
namespace optim {

namespace {

// The lanes of square_lanes.h: the same bits for every vector width.
TANDEM_CPU_INLINE void SumOfSquaresBody(const float* __restrict g, int64_t n, double* out) {
  numeric::SquareLanes s;
  s.Add(g, n);
  *out = s.Sum();
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
