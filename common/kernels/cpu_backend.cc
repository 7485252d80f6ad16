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

inline float Gelu(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  return 0.5f * x * (1.f + std::tanh(u));
}

inline float GeluGrad(float x) {
  const float u = kGeluC * (x + kGeluA * x * x * x);
  const float t = std::tanh(u);
  return 0.5f * (1.f + t) +
         0.5f * x * (1.f - t * t) * kGeluC * (1.f + 3.f * kGeluA * x * x);
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
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) y[i] = Gelu(x[i]);
      break;
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
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * GeluGrad(x[i]);
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
  for (int r = 0; r < rows; ++r) {
    float* zr = z + static_cast<int64_t>(r) * cols;
    float* yr = y + static_cast<int64_t>(r) * cols;
    if (bias != nullptr) {
      for (int c = 0; c < cols; ++c) zr[c] += bias[c];
    }
    // Row at a time so z is still in cache for the activation.
    ApplyActivation(act, cols, zr, yr);
  }
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
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    ApplyActivationGrad(act, cols, z + off, dy + off, dz + off);
    if (dbias != nullptr) AddColumnSums(1, cols, dz + off, dbias);
  }
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
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * cols;
    float* yr = y + static_cast<int64_t>(r) * cols;
    float sum = 0.f;
    for (int c = 0; c < cols; ++c) sum += xr[c];
    const float mu = sum / cols;
    float var = 0.f;
    for (int c = 0; c < cols; ++c) {
      const float d = xr[c] - mu;
      var += d * d;
    }
    const float rs = 1.f / std::sqrt(var / cols + eps);
    for (int c = 0; c < cols; ++c) {
      yr[c] = (xr[c] - mu) * rs * gamma[c] + beta_param[c];
    }
    mean[r] = mu;
    rstd[r] = rs;
  }
}

void CpuBackend::LayerNormBackward(int rows, int cols, const float* x,
                                   const float* gamma, const float* mean,
                                   const float* rstd, const float* dy,
                                   float* dx, float* dgamma,
                                   float* dbeta_param, float grad_beta) {
  ScaleOrZero(cols, grad_beta, dgamma);
  ScaleOrZero(cols, grad_beta, dbeta_param);
  const float inv_cols = 1.f / cols;
  for (int r = 0; r < rows; ++r) {
    const int64_t off = static_cast<int64_t>(r) * cols;
    const float* xr = x + off;
    const float* dyr = dy + off;
    float* dxr = dx + off;
    const float mu = mean[r];
    const float rs = rstd[r];
    // With xhat = (x - mu) * rs and g = dy * gamma:
    // dx = rs * (g - mean(g) - xhat * mean(g * xhat)).
    float sum_g = 0.f;
    float sum_gx = 0.f;
    for (int c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += g * xhat;
      dgamma[c] += dyr[c] * xhat;
      dbeta_param[c] += dyr[c];
    }
    const float mean_g = sum_g * inv_cols;
    const float mean_gx = sum_gx * inv_cols;
    for (int c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      dxr[c] = rs * (dyr[c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
}

void CpuBackend::SoftmaxCrossEntropyForward(int rows, int classes,
                                            const float* logits,
                                            const int32_t* labels, float scale,
                                            float* probs, float* loss) {
  double total = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* lr = logits + static_cast<int64_t>(r) * classes;
    float* pr = probs + static_cast<int64_t>(r) * classes;
    float mx = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < classes; ++c) mx = std::max(mx, lr[c]);
    float sum = 0.f;
    for (int c = 0; c < classes; ++c) sum += std::exp(lr[c] - mx);
    const float log_sum = std::log(sum);
    const int32_t label = labels[r];
    // Read the label's logit before probs (which may alias logits) is written.
    if (label >= 0) total += static_cast<double>(log_sum - (lr[label] - mx));
    const float inv = 1.f / sum;
    for (int c = 0; c < classes; ++c) pr[c] = std::exp(lr[c] - mx) * inv;
  }
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
  for (int64_t row = 0; row < static_cast<int64_t>(batch) * seq; ++row) {
    const int i = static_cast<int>(row % seq);
    const float* s = scores + row * seq;
    float* p = probs + row * seq;
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j <= i; ++j) mx = std::max(mx, scale * s[j]);
    float sum = 0.f;
    for (int j = 0; j <= i; ++j) {
      p[j] = std::exp(scale * s[j] - mx);
      sum += p[j];
    }
    const float inv = 1.f / sum;
    for (int j = 0; j <= i; ++j) p[j] *= inv;
    for (int j = i + 1; j < seq; ++j) p[j] = 0.f;
  }
}

void CpuBackend::CausalSoftmaxBackward(int batch, int seq, float scale,
                                       const float* probs, const float* dprobs,
                                       float* dscores) {
  for (int64_t row = 0; row < static_cast<int64_t>(batch) * seq; ++row) {
    const int i = static_cast<int>(row % seq);
    const float* p = probs + row * seq;
    const float* dp = dprobs + row * seq;
    float* ds = dscores + row * seq;
    float dot = 0.f;
    for (int j = 0; j <= i; ++j) dot += dp[j] * p[j];
    for (int j = 0; j <= i; ++j) ds[j] = scale * p[j] * (dp[j] - dot);
    for (int j = i + 1; j < seq; ++j) ds[j] = 0.f;
  }
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
