// CpuBackend: LayerNorm over the last dimension, forward and backward.
#include "common/kernels/cpu_backend.h"

#include <cmath>
#include <cstdint>

#include "common/kernels/cpu_vector_math.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace kernels {
namespace {

using cpu_internal::DotOf;
using cpu_internal::FoldLanes;
using cpu_internal::ScaleOrZero;
using cpu_internal::SumOf;
using cpu_internal::SumSqDevOf;
using cpu_internal::kLanes;

TANDEM_CPU_INLINE void LayerNormForwardRowsBody(int rows, int cols, float eps, const float* x,
                                             const float* __restrict gamma,
                                             const float* __restrict beta, float* y,
                                             float* __restrict mean, float* __restrict rstd) {
  const float inv_cols = 1.f / cols;
  for (int r = 0; r < rows; ++r) {
    const float* __restrict xr = x + static_cast<int64_t>(r) * cols;
    float* __restrict yr = y + static_cast<int64_t>(r) * cols;
    const float mu = SumOf(xr, cols) * inv_cols;
    const float rs = 1.f / std::sqrt(SumSqDevOf(xr, mu, cols) * inv_cols + eps);
    for (int c = 0; c < cols; ++c) yr[c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    mean[r] = mu;
    rstd[r] = rs;
  }
}
TANDEM_CPU_DISPATCHED(LayerNormForwardRows,
                      (int rows, int cols, float eps, const float* x, const float* gamma,
                       const float* beta, float* y, float* mean, float* rstd),
                      (rows, cols, eps, x, gamma, beta, y, mean, rstd))

// With xhat = (x - mu) * rs and g = dy * gamma:
// dx = rs * (g - mean(g) - xhat * mean(g * xhat)); dgamma += dy * xhat,
// dbeta += dy (both already scaled by the caller's grad_beta).
TANDEM_CPU_INLINE void LayerNormBackwardRowsBody(int rows, int cols, const float* x,
                                              const float* __restrict gamma, const float* mean,
                                              const float* rstd, const float* dy, float* dx,
                                              float* __restrict dgamma,
                                              float* __restrict dbeta) {
  const float inv_cols = 1.f / cols;
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    const float* __restrict xr = x + off;
    const float* __restrict dyr = dy + off;
    const float mu = mean[r], rs = rstd[r];
    const float sum_g = DotOf(dyr, gamma, cols);
    float acc[kLanes] = {};
    int j = 0;
    for (; j + kLanes <= cols; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += dyr[j + l] * gamma[j + l] * (xr[j + l] - mu);
    }
    float tail = 0.f;
    for (; j < cols; ++j) tail += dyr[j] * gamma[j] * (xr[j] - mu);
    const float sum_gx = FoldLanes(acc, tail) * rs;
    for (int c = 0; c < cols; ++c) {
      dgamma[c] += dyr[c] * (xr[c] - mu) * rs;
      dbeta[c] += dyr[c];
    }
    const float mean_g = sum_g * inv_cols, mean_gx = sum_gx * inv_cols;
    float* dxr = dx + off;  // may alias dy: no __restrict
    for (int c = 0; c < cols; ++c) {
      dxr[c] = rs * (dyr[c] * gamma[c] - mean_g - (xr[c] - mu) * rs * mean_gx);
    }
  }
}
TANDEM_CPU_DISPATCHED(LayerNormBackwardRows,
                      (int rows, int cols, const float* x, const float* gamma, const float* mean,
                       const float* rstd, const float* dy, float* dx, float* dgamma,
                       float* dbeta),
                      (rows, cols, x, gamma, mean, rstd, dy, dx, dgamma, dbeta))

}  // namespace

void CpuBackend::LayerNormForward(int rows, int cols, float eps,
                                  const float* x, const float* gamma,
                                  const float* beta_param, float* y,
                                  float* mean, float* rstd) {
  LayerNormForwardRows(rows, cols, eps, x, gamma, beta_param, y, mean, rstd);
}

void CpuBackend::LayerNormBackward(int rows, int cols, const float* x,
                                   const float* gamma, const float* mean,
                                   const float* rstd, const float* dy,
                                   float* dx, float* dgamma,
                                   float* dbeta_param, float grad_beta) {
  ScaleOrZero(cols, grad_beta, dgamma);
  ScaleOrZero(cols, grad_beta, dbeta_param);
  LayerNormBackwardRows(rows, cols, x, gamma, mean, rstd, dy, dx, dgamma, dbeta_param);
}

}  // namespace kernels
}  // namespace tandem
