// The small-M GEMMs (cpu_small_m_gemm.h) against a double-precision loop:
// shapes around the tiles (M, N, K not multiples of 6 rows or the vector
// width, 1 row, K or N below one vector), strided operands, alpha and beta,
// at every vector width this CPU has (NT: AVX-512 and AVX2 builds, NN:
// AVX-512; the others must decline). Then CpuBackend::Gemm, which picks them by shape,
// at every width (the baseline runs OpenBLAS) and beside OpenBLAS's result.
#include "common/kernels/cpu_small_m_gemm.h"

#include <cmath>
#include <random>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/numeric/cpu_dispatch.h"
#include "gtest/gtest.h"

namespace tandem {
namespace kernels {
namespace cpu_internal {
namespace {

using numeric::VectorWidth;

struct Shape {
  int m, n, k;
};

// Shapes with n * k >= kSmallMMinB, so the kernels take them.
const Shape kShapes[] = {
    {64, 1024, 1024},  // the MLP's hidden layer
    {64, 1024, 784},   // its first layer (forward), and 784 x 1024 (dx)
    {1, 1030, 131},   {5, 517, 259},  {7, 131, 1025}, {70, 263, 509},
    {128, 400, 330},  {13, 3, 44000}, {6, 44000, 3},  {17, 43691, 5},
};

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// C = alpha op(A) op(B) + beta C0 in double; nt: op(B) = B^T.
std::vector<double> Reference(bool nt, const Shape& s, float alpha, const std::vector<float>& a,
                              int lda, const std::vector<float>& b, int ldb, float beta,
                              const std::vector<float>& c0, int ldc) {
  std::vector<double> out(static_cast<size_t>(s.m) * s.n);
  for (int i = 0; i < s.m; ++i) {
    for (int j = 0; j < s.n; ++j) {
      double sum = 0;
      for (int p = 0; p < s.k; ++p) {
        const double bv =
            nt ? b[static_cast<size_t>(j) * ldb + p] : b[static_cast<size_t>(p) * ldb + j];
        sum += double{a[static_cast<size_t>(i) * lda + p]} * bv;
      }
      out[static_cast<size_t>(i) * s.n + j] =
          alpha * sum + double{beta} * c0[static_cast<size_t>(i) * ldc + j];
    }
  }
  return out;
}

// Runs one kernel (nt or nn) at one shape and checks C against the
// reference, and that C's padding columns are untouched.
void Check(bool nt, const Shape& s, float alpha, float beta, std::vector<float>* scratch) {
  SCOPED_TRACE(testing::Message() << (nt ? "NT" : "NN") << " m " << s.m << " n " << s.n << " k "
                                  << s.k << " alpha " << alpha << " beta " << beta);
  const int lda = s.k + 3, ldc = s.n + 5;
  const int ldb = nt ? s.k + 1 : s.n + 2;
  const size_t brows = nt ? s.n : s.k;
  const std::vector<float> a = Random(static_cast<size_t>(s.m) * lda, 1);
  const std::vector<float> b = Random(brows * ldb, 2);
  std::vector<float> c = Random(static_cast<size_t>(s.m) * ldc, 3);
  const std::vector<float> c0 = c;
  const bool ran = nt ? SmallMGemmNT(s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta,
                                     c.data(), ldc, scratch)
                      : SmallMGemmNN(s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta,
                                     c.data(), ldc, scratch);
  if (!nt && numeric::ActiveComputeVectorWidth() != VectorWidth::kAvx512) {
    ASSERT_FALSE(ran);  // NN has no AVX2 build
    EXPECT_EQ(c, c0);
    return;
  }
  ASSERT_TRUE(ran);
  const std::vector<double> want = Reference(nt, s, alpha, a, lda, b, ldb, beta, c0, ldc);
  const double tol = 1e-5 * std::sqrt(static_cast<double>(s.k)) * 4;
  int bad = 0;
  for (int i = 0; i < s.m; ++i) {
    for (int j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i) * ldc + j;
      if (j >= s.n) {  // padding: never written
        if (c[at] != c0[at] && ++bad < 5) ADD_FAILURE() << "wrote padding at " << i << "," << j;
        continue;
      }
      const double w = want[static_cast<size_t>(i) * s.n + j];
      if (std::abs(c[at] - w) > tol * (1 + std::abs(w)) && ++bad < 5) {
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << c[at] << ", want " << w;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

class SmallMGemmTest : public testing::Test {
 protected:
  void TearDown() override { numeric::ForceBaselineVectorWidth(false); }
};

TEST_F(SmallMGemmTest, MatchesDoubleReferenceAtEveryWidth) {
  for (VectorWidth w : numeric::SupportedVectorWidths()) {
    if (w == VectorWidth::kSse42) continue;
    SCOPED_TRACE(numeric::VectorWidthName(w));
    numeric::ForceVectorWidth(w);
    std::vector<float> scratch;
    for (const Shape& s : kShapes) {
      Check(true, s, 1.f, 0.f, &scratch);
      Check(false, s, 1.f, 0.f, &scratch);
    }
    Check(true, kShapes[3], -0.5f, 0.75f, &scratch);
    Check(false, kShapes[3], -0.5f, 0.75f, &scratch);
    Check(false, kShapes[5], 2.f, 1.f, &scratch);
  }
}

TEST_F(SmallMGemmTest, DeclinesOutsideItsShapesAndOnTheBaseline) {
  if (numeric::CpuVectorWidth() >= VectorWidth::kAvx2) {
    EXPECT_TRUE(SmallMGemmApplies(64, 1024, 1024));
  }
  EXPECT_EQ(SmallMGemmNNApplies(64, 1024, 1024), numeric::CpuVectorWidth() == VectorWidth::kAvx512);
  EXPECT_FALSE(SmallMGemmApplies(kSmallMMaxRows + 1, 1024, 1024));
  EXPECT_FALSE(SmallMGemmApplies(64, 10, 1024));  // the MLP's output layer: OpenBLAS
  EXPECT_FALSE(SmallMGemmApplies(0, 1024, 1024));
  numeric::ForceBaselineVectorWidth(true);
  EXPECT_FALSE(SmallMGemmApplies(64, 1024, 1024));
  EXPECT_FALSE(SmallMGemmNNApplies(64, 1024, 1024));
  std::vector<float> a(64 * 1024, 1.f), b(1024 * 1024, 1.f), c(64 * 1024, 7.f), scratch;
  EXPECT_FALSE(SmallMGemmNT(64, 1024, 1024, 1.f, a.data(), 1024, b.data(), 1024, 0.f, c.data(),
                            1024, &scratch));
  EXPECT_FALSE(SmallMGemmNN(64, 1024, 1024, 1.f, a.data(), 1024, b.data(), 1024, 0.f, c.data(),
                            1024, &scratch));
  EXPECT_EQ(c[0], 7.f);  // untouched
}

// CpuBackend::Gemm at Linear's two shapes, every width: the kernels where
// they apply, OpenBLAS on the baseline; all within fp32 rounding of the
// double reference (so also of each other).
TEST_F(SmallMGemmTest, BackendGemmMatchesAtEveryWidth) {
  CpuBackend be;
  const int m = 64, n = 700, k = 300;  // n * k >= kSmallMMinB
  const std::vector<float> x = Random(static_cast<size_t>(m) * k, 4);
  const std::vector<float> w = Random(static_cast<size_t>(n) * k, 5);
  const std::vector<float> dy = Random(static_cast<size_t>(m) * n, 6);
  const std::vector<float> zero(static_cast<size_t>(m) * std::max(n, k), 0.f);
  const std::vector<double> y_ref = Reference(true, {m, n, k}, 1.f, x, k, w, k, 0.f, zero, n);
  const std::vector<double> dx_ref = Reference(false, {m, k, n}, 1.f, dy, n, w, k, 0.f, zero, k);
  for (VectorWidth width : numeric::SupportedVectorWidths()) {
    SCOPED_TRACE(numeric::VectorWidthName(width));
    numeric::ForceVectorWidth(width);
    std::vector<float> y(static_cast<size_t>(m) * n, NAN), dx(static_cast<size_t>(m) * k, NAN);
    be.Gemm(Transpose::kNo, Transpose::kYes, m, n, k, 1.f, x.data(), k, w.data(), k, 0.f, y.data(),
            n);
    be.Gemm(Transpose::kNo, Transpose::kNo, m, k, n, 1.f, dy.data(), n, w.data(), k, 0.f, dx.data(),
            k);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], y_ref[i], 1e-4) << i;
    for (size_t i = 0; i < dx.size(); ++i) ASSERT_NEAR(dx[i], dx_ref[i], 1e-4) << i;
  }
}

}  // namespace
}  // namespace cpu_internal
}  // namespace kernels
}  // namespace tandem
