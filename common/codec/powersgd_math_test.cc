#include "common/codec/powersgd_math.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace codec {
namespace {

std::vector<float> Normal(uint64_t seed, int64_t n) {
  std::vector<float> x(n);
  FillStandardNormal(seed, x.data(), n);
  return x;
}

// c (a_rows x b_cols) = a (a_rows x k) b (k x b_cols), plain loops in double.
std::vector<float> MatMul(const std::vector<float>& a, const std::vector<float>& b, int64_t a_rows,
                          int64_t k, int64_t b_cols) {
  std::vector<float> c(a_rows * b_cols);
  for (int64_t i = 0; i < a_rows; ++i) {
    for (int64_t j = 0; j < b_cols; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += double{a[i * k + t]} * b[t * b_cols + j];
      c[i * b_cols + j] = static_cast<float>(s);
    }
  }
  return c;
}

std::vector<float> Transpose(const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::vector<float> t(a.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  }
  return t;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "at " << i;
}

TEST(PowerSgdMath, ProductsMatchPlainLoops) {
  const int64_t rows = 37, cols = 23;
  const int r = 3;
  const std::vector<float> m = Normal(1, rows * cols), qt = Normal(2, r * cols);
  std::vector<float> pt(r * rows), q2(r * cols), out(rows * cols);
  ProjectP(m.data(), rows, cols, qt.data(), r, pt.data());
  ExpectNear(pt, MatMul(qt, Transpose(m, rows, cols), r, cols, rows), 1e-4);
  ProjectQ(m.data(), rows, cols, pt.data(), r, q2.data());
  ExpectNear(q2, MatMul(pt, m, r, rows, cols), 1e-3);
  Reconstruct(pt.data(), q2.data(), rows, cols, r, out.data());
  ExpectNear(out, MatMul(Transpose(pt, r, rows), q2, rows, r, cols), 1e-2);
}

TEST(PowerSgdMath, RowsBecomeOrthonormal) {
  const int r = 4;
  const int64_t n = 50;
  std::vector<float> pt = Normal(3, r * n);
  OrthonormalizeRows(pt.data(), r, n);
  for (int i = 0; i < r; ++i) {
    for (int j = 0; j < r; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < n; ++k) dot += double{pt[i * n + k]} * pt[j * n + k];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5) << i << "," << j;
    }
  }
  std::vector<float> zeros(2 * n, 0.f);
  OrthonormalizeRows(zeros.data(), 2, n);
  for (float z : zeros) EXPECT_EQ(z, 0.f) << "a zero row stays zero (no NaN)";
}

// A matrix of rank r is recovered exactly by one power step from any Q:
// P spans its column space.
TEST(PowerSgdMath, OnePowerStepRecoversARankRMatrix) {
  const int64_t rows = 30, cols = 20;
  const int r = 2;
  const std::vector<float> a = Normal(4, rows * r), b = Normal(5, r * cols);
  const std::vector<float> m = MatMul(a, b, rows, r, cols);
  std::vector<float> qt = Normal(6, r * cols), pt(r * rows), out(rows * cols);
  ProjectP(m.data(), rows, cols, qt.data(), r, pt.data());
  OrthonormalizeRows(pt.data(), r, rows);
  ProjectQ(m.data(), rows, cols, pt.data(), r, qt.data());
  Reconstruct(pt.data(), qt.data(), rows, cols, r, out.data());
  ExpectNear(out, m, 1e-4);
}

TEST(PowerSgdMath, ViewsAndTheCompressRule) {
  EXPECT_EQ(ViewAsMatrix({10, 3, 4}).rows, 10);
  EXPECT_EQ(ViewAsMatrix({10, 3, 4}).cols, 12);
  EXPECT_EQ(ViewAsMatrix({7}).cols, 1);
  EXPECT_FALSE(PowerSgdCompresses({100, 1}, 1, 2)) << "1-D";
  EXPECT_TRUE(PowerSgdCompresses({32, 20}, 2, 2));   // 640 >= 2 * 52 * 2
  EXPECT_FALSE(PowerSgdCompresses({5, 16}, 2, 2));   // 80 < 2 * 21 * 2
  EXPECT_FALSE(PowerSgdCompresses({8, 8}, 8, 1)) << "rank as large as the matrix";
}

TEST(PowerSgdMath, NormalValuesAreSeededAndStandard) {
  const std::vector<float> a = Normal(9, 10001), b = Normal(9, 10001), c = Normal(10, 10001);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = 0, sq = 0;
  for (float x : a) mean += x, sq += double{x} * x;
  mean /= a.size();
  EXPECT_NEAR(mean, 0, 0.05);
  EXPECT_NEAR(sq / a.size() - mean * mean, 1, 0.05);
}

}  // namespace
}  // namespace codec
}  // namespace tandem
