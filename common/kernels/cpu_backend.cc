#include "common/kernels/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/kernels/cpu_small_m_gemm.h"
#include "common/kernels/cpu_vector_math.h"
#include "common/numeric/precision.h"

namespace tandem {
namespace kernels {
namespace {

using cpu_internal::ScaleOrZero;

constexpr size_t kAlignment = 64;

CBLAS_TRANSPOSE ToCblas(Transpose t) {
  return t == Transpose::kYes ? CblasTrans : CblasNoTrans;
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
  // A batch of few rows against a large weight: a kernel that reads the
  // weight in place beats OpenBLAS's packing of it (cpu_small_m_gemm.h).
  if (ta == Transpose::kNo && tb == Transpose::kYes &&
      cpu_internal::SmallMGemmNT(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &small_m_scratch_)) {
    return;
  }
  if (ta == Transpose::kNo && tb == Transpose::kNo &&
      cpu_internal::SmallMGemmNN(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &small_m_scratch_)) {
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
