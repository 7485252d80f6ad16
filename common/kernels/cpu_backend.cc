#include "common/kernels/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/numeric/cpu_dispatch.h"
#include "common/numeric/precision.h"

namespace tandem {
namespace kernels {
namespace {

constexpr size_t kAlignment = 64;
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

CBLAS_TRANSPOSE ToCblas(Transpose t) {
  return t == Transpose::kYes ? CblasTrans : CblasNoTrans;
}

// ---- Element-wise hot loops, compiled twice ----------------------------------
// The build targets x86-64-v2 (SSE4.2), so plain loops get 128-bit vectors.
// Each body below is an always-inline template instantiated twice: into a
// function with target("avx2,fma") (256-bit vectors) and into one for the
// baseline; the first call picks one from the CPU's features. Bodies are
// branch-free (a ReLU as a select, not an if: a data-dependent branch on
// the sign mispredicts about half the time) and mark their pointers
// __restrict; in-place calls (dz == dy) have their own loop, because the
// vectoriser's run-time overlap check would send an exact alias to the
// scalar fallback.
TANDEM_CPU_INLINE float Relu(float v) { return v > 0.f ? v : 0.f; }

// z = z + bias (bias may be null); y = relu(z) (y != z) or y = z.
TANDEM_CPU_INLINE void BiasReluForwardBody(int rows, int cols, const float* __restrict bias,
                                       float* z, float* y, bool relu) {
  for (int r = 0; r < rows; ++r) {
    float* __restrict zr = z + static_cast<int64_t>(r) * cols;
    if (!relu) {
      if (bias != nullptr) {
        for (int c = 0; c < cols; ++c) zr[c] += bias[c];
      }
      if (y != z) std::memcpy(y + static_cast<int64_t>(r) * cols, zr, cols * sizeof(float));
      continue;
    }
    float* __restrict yr = y + static_cast<int64_t>(r) * cols;
    if (bias != nullptr) {
      for (int c = 0; c < cols; ++c) {
        const float v = zr[c] + bias[c];
        zr[c] = v;
        yr[c] = Relu(v);
      }
    } else {
      for (int c = 0; c < cols; ++c) yr[c] = Relu(zr[c]);
    }
  }
}
TANDEM_CPU_DISPATCHED(BiasReluForward,
                  (int rows, int cols, const float* bias, float* z, float* y, bool relu),
                  (rows, cols, bias, z, y, relu))

// dz = dy * relu'(z) (relu) or dz = dy; dbias (may be null) += column sums
// of dz. dz either equals dy or does not overlap it.
TANDEM_CPU_INLINE void ReluBackwardBody(int rows, int cols, const float* z, const float* dy,
                                    float* dz, float* dbias, bool relu) {
  float* __restrict db = dbias;
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    const float* __restrict zr = z + off;
    if (dz == dy) {
      float* __restrict d = dz + off;
      if (relu && db != nullptr) {
        for (int c = 0; c < cols; ++c) {
          const float g = d[c];
          const float v = zr[c] > 0.f ? g : 0.f;
          d[c] = v;
          db[c] += v;
        }
      } else if (relu) {
        for (int c = 0; c < cols; ++c) {
          const float g = d[c];
          d[c] = zr[c] > 0.f ? g : 0.f;
        }
      } else if (db != nullptr) {
        for (int c = 0; c < cols; ++c) db[c] += d[c];
      }
    } else {
      const float* __restrict g = dy + off;
      float* __restrict d = dz + off;
      if (relu && db != nullptr) {
        for (int c = 0; c < cols; ++c) {
          const float v = zr[c] > 0.f ? g[c] : 0.f;
          d[c] = v;
          db[c] += v;
        }
      } else if (relu) {
        for (int c = 0; c < cols; ++c) d[c] = zr[c] > 0.f ? g[c] : 0.f;
      } else {
        std::memcpy(d, g, cols * sizeof(float));
        if (db != nullptr) {
          for (int c = 0; c < cols; ++c) db[c] += g[c];
        }
      }
    }
  }
}
TANDEM_CPU_DISPATCHED(ReluBackward,
                  (int rows, int cols, const float* z, const float* dy, float* dz, float* dbias,
                   bool relu),
                  (rows, cols, z, dy, dz, dbias, relu))

// out += column sums of m [rows, cols].
TANDEM_CPU_INLINE void AddColumnSumsBody(int rows, int cols, const float* m, float* out) {
  float* __restrict o = out;
  for (int r = 0; r < rows; ++r) {
    const float* __restrict row = m + static_cast<int64_t>(r) * cols;
    for (int c = 0; c < cols; ++c) o[c] += row[c];
  }
}
TANDEM_CPU_DISPATCHED(AddColumnSums, (int rows, int cols, const float* m, float* out),
                  (rows, cols, m, out))

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
  for (int j = 0; j < n; ++j) x[j] = ExpApprox(x[j] - mx);
  const float sum = SumOf(x, n);
  const float inv = 1.f / sum;
  for (int j = 0; j < n; ++j) x[j] *= inv;
  *sum_out = sum;
  *max_out = mx;
}

// z += bias (may be null) over rows; y = gelu(z). y and z do not overlap.
TANDEM_CPU_INLINE void BiasGeluForwardBody(int rows, int cols, const float* __restrict bias,
                                           float* __restrict z, float* __restrict y) {
  for (int r = 0; r < rows; ++r) {
    float* __restrict zr = z + static_cast<int64_t>(r) * cols;
    float* __restrict yr = y + static_cast<int64_t>(r) * cols;
    if (bias != nullptr) {
      for (int c = 0; c < cols; ++c) zr[c] += bias[c];
    }
    for (int c = 0; c < cols; ++c) yr[c] = GeluFast(zr[c]);
  }
}
TANDEM_CPU_DISPATCHED(BiasGeluForward,
                      (int rows, int cols, const float* bias, float* z, float* y),
                      (rows, cols, bias, z, y))

// out = dy * gelu'(x) over n; dbias (may be null) += out. out may not
// overlap x or dy (callers stage through a block buffer).
TANDEM_CPU_INLINE void GeluGradBody(int n, const float* __restrict x, const float* __restrict dy,
                                    float* __restrict out, float* __restrict dbias) {
  for (int i = 0; i < n; ++i) out[i] = dy[i] * GeluGradFast(x[i]);
  if (dbias != nullptr) {
    for (int i = 0; i < n; ++i) dbias[i] += out[i];
  }
}
TANDEM_CPU_DISPATCHED(GeluGrad,
                      (int n, const float* x, const float* dy, float* out, float* dbias),
                      (n, x, dy, out, dbias))

// y = gelu(x) over n, x and y not overlapping.
TANDEM_CPU_INLINE void GeluRangeBody(int n, const float* __restrict x, float* __restrict y) {
  for (int i = 0; i < n; ++i) y[i] = GeluFast(x[i]);
}
TANDEM_CPU_DISPATCHED(GeluRange, (int n, const float* x, float* y), (n, x, y))

// Rows of at most kGeluBlock: dy and dz may alias, so each block is
// computed into a stack buffer, then copied.
constexpr int kGeluBlock = 1024;

// dz = dy * gelu'(z) over [rows, cols]; dbias (may be null) += column sums.
void GeluBackwardRows(int rows, int cols, const float* z, const float* dy, float* dz,
                      float* dbias) {
  alignas(64) float tmp[kGeluBlock];
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    for (int lo = 0; lo < cols; lo += kGeluBlock) {
      const int len = std::min(kGeluBlock, cols - lo);
      GeluGrad(len, z + off + lo, dy + off + lo, tmp, dbias == nullptr ? nullptr : dbias + lo);
      std::memcpy(dz + off + lo, tmp, len * sizeof(float));
    }
  }
}

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

// Causal softmax in place over `batch` [seq, seq] matrices.
TANDEM_CPU_INLINE void CausalSoftmaxInPlaceBody(int batch, int seq, float scale, float* p) {
  for (int64_t row = 0; row < static_cast<int64_t>(batch) * seq; ++row) {
    const int i = static_cast<int>(row % seq);
    float* __restrict pr = p + row * seq;
    float sum, mx;
    SoftmaxRowInPlace(pr, i + 1, scale, &sum, &mx);
    for (int j = i + 1; j < seq; ++j) pr[j] = 0.f;
  }
}
TANDEM_CPU_DISPATCHED(CausalSoftmaxInPlace, (int batch, int seq, float scale, float* p),
                      (batch, seq, scale, p))

// d = scale * p * (d - sum_j d * p) in place, 0 above the diagonal.
TANDEM_CPU_INLINE void CausalSoftmaxGradInPlaceBody(int batch, int seq, float scale, const float* p,
                                             float* d) {
  for (int64_t row = 0; row < static_cast<int64_t>(batch) * seq; ++row) {
    const int n = static_cast<int>(row % seq) + 1;
    const float* __restrict pr = p + row * seq;
    float* __restrict dr = d + row * seq;
    const float dot = DotOf(dr, pr, n);
    for (int j = 0; j < n; ++j) dr[j] = scale * pr[j] * (dr[j] - dot);
    for (int j = n; j < seq; ++j) dr[j] = 0.f;
  }
}
TANDEM_CPU_DISPATCHED(CausalSoftmaxGradInPlace,
                      (int batch, int seq, float scale, const float* p, float* d),
                      (batch, seq, scale, p, d))

// probs = softmax(logits) per row; returns sum over labelled rows of
// -log probs[label] (double). probs may alias logits.
TANDEM_CPU_INLINE void SoftmaxXentRowsBody(int rows, int classes, const float* logits,
                                       const int32_t* labels, float* probs, double* total) {
  double t = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* lr = logits + static_cast<int64_t>(r) * classes;
    float* pr = probs + static_cast<int64_t>(r) * classes;
    const int32_t label = labels[r];
    // Read the label's logit before probs (which may alias logits) is written.
    const float picked = label >= 0 ? lr[label] : 0.f;
    if (pr != lr) std::memcpy(pr, lr, classes * sizeof(float));
    float sum, mx;
    SoftmaxRowInPlace(pr, classes, 1.f, &sum, &mx);
    if (label >= 0) t += static_cast<double>(std::log(sum) - (picked - mx));
  }
  *total = t;
}
TANDEM_CPU_DISPATCHED(SoftmaxXentRows,
                      (int rows, int classes, const float* logits, const int32_t* labels,
                       float* probs, double* total),
                      (rows, classes, logits, labels, probs, total))

// y = act(x) over n elements; separate loops per activation so each one is a
// simple vectorisable loop.
void ApplyActivation(Activation act, int64_t n, const float* x, float* y) {
  switch (act) {
    case Activation::kNone:
      if (x != y) std::memmove(y, x, n * sizeof(float));
      break;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
      break;
    case Activation::kGelu: {
      alignas(64) float tmp[kGeluBlock];
      for (int64_t lo = 0; lo < n; lo += kGeluBlock) {
        const int len = static_cast<int>(std::min<int64_t>(kGeluBlock, n - lo));
        GeluRange(len, x + lo, tmp);
        std::memcpy(y + lo, tmp, len * sizeof(float));
      }
      break;
    }
  }
}

// dx = dy * act'(x).
void ApplyActivationGrad(Activation act, int64_t n, const float* x,
                         const float* dy, float* dx) {
  switch (act) {
    case Activation::kNone:
      if (dx != dy) std::memmove(dx, dy, n * sizeof(float));
      break;
    case Activation::kRelu:
      // One row of n: the branch-free, alias-aware loop above.
      for (int64_t lo = 0; lo < n; lo += INT32_MAX / 2) {
        const int len = static_cast<int>(std::min<int64_t>(n - lo, INT32_MAX / 2));
        ReluBackward(1, len, x + lo, dy + lo, dx + lo, nullptr, /*relu=*/true);
      }
      break;
    case Activation::kGelu:
      for (int64_t lo = 0; lo < n; lo += kGeluBlock) {
        const int len = static_cast<int>(std::min<int64_t>(kGeluBlock, n - lo));
        GeluBackwardRows(1, len, x + lo, dy + lo, dx + lo, nullptr);
      }
      break;
  }
}

// out = beta * out (beta == 0 overwrites, ignoring NaN garbage).
void ScaleOrZero(int64_t n, float beta, float* out) {
  if (beta == 0.f) {
    std::memset(out, 0, n * sizeof(float));
  } else if (beta != 1.f) {
    for (int64_t i = 0; i < n; ++i) out[i] *= beta;
  }
}

}  // namespace

CpuBackend::CpuBackend(const BackendOptions& options) {
  openblas_set_num_threads(std::max(1, options.cpu_threads));
}

absl::StatusOr<void*> CpuBackend::AllocateRaw(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, std::max(rounded, kAlignment));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cpu backend: cannot allocate ", bytes,
        " bytes of host memory; reduce the batch size or model width"));
  }
  return p;
}

void CpuBackend::Free(void* ptr) { std::free(ptr); }

absl::Status CpuBackend::CopyToDevice(void* dst, const void* host_src,
                                      size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(void* host_dst, const void* src,
                                    size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
  return absl::OkStatus();
}

void CpuBackend::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

void CpuBackend::Fill(float* x, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i) x[i] = value;
}

void CpuBackend::Gemm(Transpose ta, Transpose tb, int m, int n, int k,
                      float alpha, const float* a, int lda, const float* b,
                      int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // C = beta * C; BLAS implementations differ here
    for (int i = 0; i < m; ++i) ScaleOrZero(n, beta, c + static_cast<int64_t>(i) * ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, ToCblas(ta), ToCblas(tb), m, n, k, alpha, a, lda,
              b, ldb, beta, c, ldc);
}

void CpuBackend::GemmStridedBatched(Transpose ta, Transpose tb, int m, int n,
                                    int k, float alpha, const float* a,
                                    int lda, int64_t stride_a, const float* b,
                                    int ldb, int64_t stride_b, float beta,
                                    float* c, int ldc, int64_t stride_c,
                                    int batch) {
  for (int i = 0; i < batch; ++i) {
    Gemm(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
         beta, c + i * stride_c, ldc);
  }
}

void CpuBackend::BiasActivationForward(Activation act, int rows, int cols,
                                       const float* bias, float* z,
                                       float* y) {
  if (act != Activation::kGelu) {
    BiasReluForward(rows, cols, bias, z, y, act == Activation::kRelu);
    return;
  }
  BiasGeluForward(rows, cols, bias, z, y);
}

void CpuBackend::BiasActivationBackward(Activation act, int rows, int cols,
                                        const float* z, const float* dy,
                                        float* dz, float* dbias,
                                        float dbias_beta) {
  if (dbias != nullptr) ScaleOrZero(cols, dbias_beta, dbias);
  if (act != Activation::kGelu) {
    // One pass: activation gradient and bias column sums together.
    ReluBackward(rows, cols, z, dy, dz, dbias, act == Activation::kRelu);
    return;
  }
  GeluBackwardRows(rows, cols, z, dy, dz, dbias);
}

void CpuBackend::ActivationForward(Activation act, int64_t n, const float* x,
                                   float* y) {
  ApplyActivation(act, n, x, y);
}

void CpuBackend::ActivationBackward(Activation act, int64_t n, const float* x,
                                    const float* dy, float* dx) {
  ApplyActivationGrad(act, n, x, dy, dx);
}

void CpuBackend::BiasGrad(int rows, int cols, const float* dy, float beta,
                          float* dbias) {
  ScaleOrZero(cols, beta, dbias);
  AddColumnSums(rows, cols, dy, dbias);
}

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

void CpuBackend::SoftmaxCrossEntropyForward(int rows, int classes,
                                            const float* logits,
                                            const int32_t* labels, float scale,
                                            float* probs, float* loss) {
  double total = 0.0;
  SoftmaxXentRows(rows, classes, logits, labels, probs, &total);
  *loss = static_cast<float>(total * scale);
}

void CpuBackend::SoftmaxCrossEntropyBackward(int rows, int classes,
                                             const float* probs,
                                             const int32_t* labels,
                                             float scale, float* dlogits) {
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * classes;
    const int32_t label = labels[r];
    if (label < 0) {
      std::memset(dlogits + off, 0, classes * sizeof(float));
      continue;
    }
    for (int c = 0; c < classes; ++c) dlogits[off + c] = scale * probs[off + c];
    dlogits[off + label] -= scale;
  }
}

void CpuBackend::ArgmaxRows(int rows, int cols, const float* x, int32_t* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * cols;
    int best = 0;
    for (int c = 1; c < cols; ++c) {
      if (xr[c] > xr[best]) best = c;
    }
    out[r] = best;
  }
}

void CpuBackend::EmbeddingForward(int batch, int seq, int dim,
                                  const int32_t* ids, const float* token_table,
                                  const float* pos_table, float* out) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const int64_t row = static_cast<int64_t>(b) * seq + t;
      const float* tok = token_table + static_cast<int64_t>(ids[row]) * dim;
      float* o = out + row * dim;
      if (pos_table != nullptr) {
        const float* pos = pos_table + static_cast<int64_t>(t) * dim;
        for (int c = 0; c < dim; ++c) o[c] = tok[c] + pos[c];
      } else {
        std::memcpy(o, tok, dim * sizeof(float));
      }
    }
  }
}

void CpuBackend::EmbeddingBackward(int batch, int seq, int dim,
                                   const int32_t* ids, const float* dout,
                                   float* dtoken, float* dpos) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const int64_t row = static_cast<int64_t>(b) * seq + t;
      const float* g = dout + row * dim;
      float* dt = dtoken + static_cast<int64_t>(ids[row]) * dim;
      for (int c = 0; c < dim; ++c) dt[c] += g[c];
      if (dpos != nullptr) {
        float* dp = dpos + static_cast<int64_t>(t) * dim;
        for (int c = 0; c < dim; ++c) dp[c] += g[c];
      }
    }
  }
}

// Row `src` of [batch, seq, n, heads, head_dim] <-> row `dst` of
// [n, batch, heads, seq, head_dim]; `split` picks the direction.
static void PermuteHeads(int batch, int seq, int n, int heads, int head_dim, const float* x,
                         float* out, bool split) {
  const size_t row_bytes = static_cast<size_t>(head_dim) * sizeof(float);
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      for (int i = 0; i < n; ++i) {
        for (int h = 0; h < heads; ++h) {
          const int64_t merged = ((static_cast<int64_t>(b) * seq + t) * n + i) * heads + h;
          const int64_t split_row = ((static_cast<int64_t>(i) * batch + b) * heads + h) * seq + t;
          const int64_t src = split ? merged : split_row;
          const int64_t dst = split ? split_row : merged;
          std::memcpy(out + dst * head_dim, x + src * head_dim, row_bytes);
        }
      }
    }
  }
}

void CpuBackend::SplitHeads(int batch, int seq, int n, int heads, int head_dim,
                            const float* x, float* out) {
  PermuteHeads(batch, seq, n, heads, head_dim, x, out, /*split=*/true);
}

void CpuBackend::MergeHeads(int batch, int seq, int n, int heads, int head_dim,
                            const float* x, float* out) {
  PermuteHeads(batch, seq, n, heads, head_dim, x, out, /*split=*/false);
}

void CpuBackend::CausalSoftmaxForward(int batch, int seq, float scale,
                                      const float* scores, float* probs) {
  if (probs != scores) {
    std::memcpy(probs, scores, static_cast<size_t>(batch) * seq * seq * sizeof(float));
  }
  CausalSoftmaxInPlace(batch, seq, scale, probs);
}

void CpuBackend::CausalSoftmaxBackward(int batch, int seq, float scale,
                                       const float* probs, const float* dprobs,
                                       float* dscores) {
  if (dscores != dprobs) {
    std::memcpy(dscores, dprobs, static_cast<size_t>(batch) * seq * seq * sizeof(float));
  }
  CausalSoftmaxGradInPlace(batch, seq, scale, probs, dscores);
}

void CpuBackend::Axpy(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void CpuBackend::Add(int64_t n, const float* a, const float* b, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void CpuBackend::Scale(int64_t n, float alpha, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void CpuBackend::SumSquares(int64_t n, const float* x, float* result) {
  // Blocks of fp32 partial sums (vectorisable) folded into a double.
  double total = 0.0;
  constexpr int64_t kBlock = 4096;
  for (int64_t lo = 0; lo < n; lo += kBlock) {
    const int64_t hi = std::min(n, lo + kBlock);
    float partial = 0.f;
    for (int64_t i = lo; i < hi; ++i) partial += x[i] * x[i];
    total += partial;
  }
  *result = static_cast<float>(total);
}

void CpuBackend::CountNonFinite(int64_t n, const float* x, float* result) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += (numeric::FloatBits(x[i]) & 0x7f800000u) == 0x7f800000u ? 1 : 0;
  }
  *result = static_cast<float>(count);
}

// The conversions are common/numeric/precision's (round to nearest even,
// exhaustively tested there); sizes match by construction, so the span
// checks cannot fail.
void CpuBackend::CastF32ToBf16(int64_t n, const float* x, uint16_t* y) {
  (void)numeric::FloatToBf16(absl::MakeConstSpan(x, n), absl::MakeSpan(y, n));
}

void CpuBackend::CastBf16ToF32(int64_t n, const uint16_t* x, float* y) {
  (void)numeric::Bf16ToFloat(absl::MakeConstSpan(x, n), absl::MakeSpan(y, n));
}

void CpuBackend::CastF32ToF16(int64_t n, const float* x, uint16_t* y) {
  (void)numeric::FloatToHalf(absl::MakeConstSpan(x, n), absl::MakeSpan(y, n));
}

void CpuBackend::CastF16ToF32(int64_t n, const uint16_t* x, float* y) {
  (void)numeric::HalfToFloat(absl::MakeConstSpan(x, n), absl::MakeSpan(y, n));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    const BackendOptions& options) {
  return std::unique_ptr<Backend>(new CpuBackend(options));
}

}  // namespace kernels
}  // namespace tandem
