// Vectorisable fp32 building blocks of the CPU backend's kernels (internal
// to common/kernels: the cpu_*.cc files include it): a branch-free exp, the
// tanh-form GELU and its derivative, and row reductions over fixed lanes.
// Everything is always-inline so each dispatched body (cpu_dispatch.h)
// compiles it at its own vector width. Pure functions; thread-safe.
#ifndef TANDEM_COMMON_KERNELS_CPU_VECTOR_MATH_H_
#define TANDEM_COMMON_KERNELS_CPU_VECTOR_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace kernels {
namespace cpu_internal {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// ---- Vectorisable math: exp, GELU, row reductions ------------------------------
// std::exp / std::tanh are library calls the vectoriser cannot inline; a
// tanh-form GELU spent most of a GPT step in them (gpt_breakdown_bench).
// ExpApprox is the Cephes single-precision exp (Cody-Waite range reduction,
// degree-6 polynomial; within 2 ulp of expf for normal results), written
// branch-free so the loops below vectorise at every width. Results below
// about 2^-125 (x < -87) are flushed to 0, never denormal: a denormal
// probability makes every later GEMM that reads it many times slower.
// Above 88.3 it saturates at exp(88.3).
TANDEM_CPU_INLINE float ExpApprox(float in) {
  const float x = in < -88.f ? -88.f : (in > 88.3f ? 88.3f : in);
  float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.f;
  // 2^n as bits; n <= -126 (x below about -87) gives a zero scale, so the
  // result is 0 rather than denormal.
  n = n < -125.f ? -127.f : n;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

// GELU (tanh form) through 0.5 * (1 + tanh(u)) = sigmoid(2u): one exp and
// one division. sigmoid(2u) is flushed to 0 for -2u > 80 (x < about -9.9,
// where GELU and its gradient are below 1e-33), as tanh's saturation at -1
// did, so neither output is ever denormal.
TANDEM_CPU_INLINE float SigmoidOfTwo(float u) {
  const float s = 1.f / (1.f + ExpApprox(-2.f * u));
  return -2.f * u > 80.f ? 0.f : s;
}

TANDEM_CPU_INLINE float GeluFast(float x) {
  return x * SigmoidOfTwo(kGeluC * (x + kGeluA * x * x * x));
}

// d/dx of GeluFast: with s = sigmoid(2u), tanh(u) = 2s - 1 and
// 1 - tanh^2 = 4 s (1 - s).
TANDEM_CPU_INLINE float GeluGradFast(float x) {
  const float s = SigmoidOfTwo(kGeluC * (x + kGeluA * x * x * x));
  return s + 2.f * x * s * (1.f - s) * kGeluC * (1.f + 3.f * kGeluA * x * x);
}

// GeluFast(x), with GeluGradFast(x) in *grad from the same sigmoid.
TANDEM_CPU_INLINE float GeluAndGradFast(float x, float* grad) {
  const float s = SigmoidOfTwo(kGeluC * (x + kGeluA * x * x * x));
  *grad = s + 2.f * x * s * (1.f - s) * kGeluC * (1.f + 3.f * kGeluA * x * x);
  return x * s;
}

// Reductions over 16 fixed lanes, folded in a fixed order: vectorised
// without -ffast-math and with the same result at every width.
constexpr int kLanes = 16;

TANDEM_CPU_INLINE float FoldLanes(const float* acc, float tail) {
  for (int l = 0; l < kLanes; ++l) tail += acc[l];
  return tail;
}

TANDEM_CPU_INLINE float SumOf(const float* __restrict x, int n) {
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += x[j + l];
  }
  float tail = 0.f;
  for (; j < n; ++j) tail += x[j];
  return FoldLanes(acc, tail);
}

TANDEM_CPU_INLINE float DotOf(const float* __restrict a, const float* __restrict b, int n) {
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  }
  float tail = 0.f;
  for (; j < n; ++j) tail += a[j] * b[j];
  return FoldLanes(acc, tail);
}

// Sum of (x - mu)^2.
TANDEM_CPU_INLINE float SumSqDevOf(const float* __restrict x, float mu, int n) {
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float d = x[j + l] - mu;
      acc[l] += d * d;
    }
  }
  float tail = 0.f;
  for (; j < n; ++j) tail += (x[j] - mu) * (x[j] - mu);
  return FoldLanes(acc, tail);
}

TANDEM_CPU_INLINE float MaxOf(const float* __restrict x, int n) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = -std::numeric_limits<float>::infinity();
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] = acc[l] < x[j + l] ? x[j + l] : acc[l];
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; j < n; ++j) m = m < x[j] ? x[j] : m;
  for (int l = 0; l < kLanes; ++l) m = m < acc[l] ? acc[l] : m;
  return m;
}

// Softmax of x[0..n) in place, each value first multiplied by `scale`;
// returns the sum of exponentials (before normalising) and the max.
TANDEM_CPU_INLINE void SoftmaxRowInPlace(float* __restrict x, int n, float scale, float* sum_out,
                                         float* max_out) {
  if (scale != 1.f) {
    for (int j = 0; j < n; ++j) x[j] *= scale;
  }
  const float mx = MaxOf(x, n);
  // exp and its sum in one pass, summed in SumOf's order (same bits).
  float acc[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float e = ExpApprox(x[j + l] - mx);
      x[j + l] = e;
      acc[l] += e;
    }
  }
  float tail = 0.f;
  for (; j < n; ++j) {
    const float e = ExpApprox(x[j] - mx);
    x[j] = e;
    tail += e;
  }
  const float sum = FoldLanes(acc, tail);
  const float inv = 1.f / sum;
  for (int j = 0; j < n; ++j) x[j] *= inv;
  *sum_out = sum;
  *max_out = mx;
}

// out = beta * out (beta == 0 overwrites, ignoring NaN garbage).
inline void ScaleOrZero(int64_t n, float beta, float* out) {
  if (beta == 0.f) {
    std::memset(out, 0, n * sizeof(float));
  } else if (beta != 1.f) {
    for (int64_t i = 0; i < n; ++i) out[i] *= beta;
  }
}

}  // namespace cpu_internal
}  // namespace kernels
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CPU_VECTOR_MATH_H_
