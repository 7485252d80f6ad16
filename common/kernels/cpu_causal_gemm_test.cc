// CpuBackend::CausalGemmStridedBatched against a double-precision loop, for
// each kind, sequence lengths around the kernel's 6-row tiles and 64-column
// panels, head sizes 16..256 and two heads at strides. A above the diagonal
// holds NaN, so a kernel that read it would fail. On a CPU without AVX-512
// (or with a narrower width forced) the backend must decline.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/numeric/cpu_dispatch.h"
#include "gtest/gtest.h"

namespace tandem {
namespace kernels {
namespace {

struct Case {
  CausalGemm kind;
  int seq, dim;
};

// What the kernel must write: C [seq, seq] (kScores, j <= i) or [seq, dim].
double Reference(const Case& c, float alpha, const std::vector<float>& a, int lda,
                 const std::vector<float>& b, int ldb, int i, int j) {
  double sum = 0;
  if (c.kind == CausalGemm::kScores) {
    for (int d = 0; d < c.dim; ++d) sum += double{a[i * lda + d]} * b[j * ldb + d];
  } else if (c.kind == CausalGemm::kLowerTimes) {
    for (int p = 0; p <= i; ++p) sum += double{a[i * lda + p]} * b[p * ldb + j];
  } else {
    for (int p = i; p < c.seq; ++p) sum += double{a[p * lda + i]} * b[p * ldb + j];
  }
  return alpha * sum;
}

void Check(CpuBackend* be, const Case& c) {
  SCOPED_TRACE(testing::Message() << "kind " << static_cast<int>(c.kind) << " seq " << c.seq
                                  << " dim " << c.dim);
  const bool scores = c.kind == CausalGemm::kScores;
  const int heads = 2;
  // Per head: A [seq, lda], B [seq, ldb], C [seq, ldc], padded so the
  // leading dimensions exceed the widths as in attention.cc.
  const int lda = scores ? c.dim + 3 : c.seq + 1, ldb = c.dim + 5;
  const int ldc = scores ? c.seq + 2 : c.dim + 7;
  const int64_t sa = int64_t{c.seq} * lda, sb = int64_t{c.seq} * ldb, sc = int64_t{c.seq} * ldc;
  std::mt19937 rng(c.seq * 1000 + c.dim);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> a(heads * sa), b(heads * sb);
  for (float& v : a) v = normal(rng);
  for (float& v : b) v = normal(rng);
  if (!scores) {  // A is lower triangular: what lies above must never be read
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < c.seq; ++i) {
        for (int j = i + 1; j < lda; ++j) a[h * sa + i * lda + j] = std::nanf("");
      }
    }
  }
  std::vector<float> out(heads * sc, -7.f);
  const float alpha = scores ? 0.25f : 1.f;
  ASSERT_TRUE(be->CausalGemmStridedBatched(c.kind, c.seq, c.dim, alpha, a.data(), lda, sa,
                                           b.data(), ldb, sb, out.data(), ldc, sc, heads));
  for (int h = 0; h < heads; ++h) {
    const std::vector<float> ha(a.begin() + h * sa, a.begin() + (h + 1) * sa);
    const std::vector<float> hb(b.begin() + h * sb, b.begin() + (h + 1) * sb);
    for (int i = 0; i < c.seq; ++i) {
      const int cols = scores ? i + 1 : c.dim;
      for (int j = 0; j < cols; ++j) {
        const double want = Reference(c, alpha, ha, lda, hb, ldb, i, j);
        const double bound = 1e-5 * (scores ? c.dim : c.seq) + 1e-5 * std::fabs(want);
        ASSERT_NEAR(out[h * sc + i * ldc + j], want, bound) << "head " << h << " C[" << i
                                                            << ", " << j << "]";
      }
      // Past the row's width (ldc padding) nothing is written.
      const int width = scores ? c.seq : c.dim;
      for (int j = width; j < ldc; ++j) ASSERT_EQ(out[h * sc + i * ldc + j], -7.f);
    }
  }
}

TEST(CpuCausalGemmTest, MatchesDoublePrecisionOnEveryKindAndEdge) {
  CpuBackend be;
  numeric::ForceBaselineVectorWidth(false);
  if (numeric::ActiveComputeVectorWidth() != numeric::VectorWidth::kAvx512) {
    EXPECT_FALSE(be.CausalGemmStridedBatched(CausalGemm::kScores, 8, 16, 1.f, nullptr, 16, 0,
                                             nullptr, 16, 0, nullptr, 8, 0, 1));
    GTEST_SKIP() << "no AVX-512: the backend declines and attention runs on OpenBLAS";
  }
  for (CausalGemm kind :
       {CausalGemm::kScores, CausalGemm::kLowerTimes, CausalGemm::kLowerTransposedTimes}) {
    for (int seq : {1, 5, 6, 7, 13, 64, 65, 133}) {
      for (int dim : {16, 48, 64, 80}) Check(&be, {kind, seq, dim});
    }
    Check(&be, {kind, 70, 256});
  }
}

TEST(CpuCausalGemmTest, DeclinesShapesAndWidthsItHasNoKernelFor) {
  CpuBackend be;
  for (int dim : {0, 8, 20, 272}) {
    EXPECT_FALSE(be.CausalGemmStridedBatched(CausalGemm::kLowerTimes, 4, dim, 1.f, nullptr, 4, 0,
                                             nullptr, dim, 0, nullptr, dim, 0, 1))
        << dim;
  }
  numeric::ForceVectorWidth(numeric::VectorWidth::kAvx2);
  EXPECT_FALSE(be.CausalGemmStridedBatched(CausalGemm::kScores, 4, 16, 1.f, nullptr, 16, 0,
                                           nullptr, 16, 0, nullptr, 4, 0, 1));
  numeric::ForceBaselineVectorWidth(false);
}

}  // namespace
}  // namespace kernels
}  // namespace tandem
