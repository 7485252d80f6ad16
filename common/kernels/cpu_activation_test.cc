// BiasActivationForwardKeepGrad / BiasActivationBackwardFromGrad (the
// forward that keeps act'(z) for a multiply-only backward) against a direct
// double-precision computation, for every activation, at every vector width.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/numeric/cpu_dispatch.h"
#include "gtest/gtest.h"

namespace tandem {
namespace kernels {
namespace {

std::vector<float> Random(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

double Act(Activation act, double x) {
  switch (act) {
    case Activation::kGelu:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::kRelu:
      return x > 0 ? x : 0;
    default:
      return x;
  }
}

double ActGrad(Activation act, double x) {
  switch (act) {
    case Activation::kGelu: {
      const double c = std::sqrt(2 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
    }
    case Activation::kRelu:
      return x > 0 ? 1 : 0;
    default:
      return 1;
  }
}

bool NotDenormal(float v) { return v == 0.f || std::fabs(v) >= std::numeric_limits<float>::min(); }

TEST(CpuActivationTest, KeepGradForwardAndFromGradBackwardMatchDouble) {
  CpuBackend be;
  // Odd width (vector tails), values across GELU's saturation on both sides.
  const int rows = 5, cols = 203, n = rows * cols;
  const std::vector<float> z0 = Random(n, 1, -12.f, 12.f), bias = Random(cols, 2, -1.f, 1.f);
  const std::vector<float> dy = Random(n, 3, -1.f, 1.f);
  for (Activation act : {Activation::kGelu, Activation::kRelu, Activation::kNone}) {
    for (numeric::VectorWidth w : numeric::SupportedVectorWidths()) {
      numeric::ForceVectorWidth(w);
      for (bool with_bias : {true, false}) {
        SCOPED_TRACE(testing::Message() << "act " << static_cast<int>(act) << " width "
                                        << numeric::VectorWidthName(w) << " bias " << with_bias);
        std::vector<float> z = z0, y(n), dz(n), inplace = dy, db(cols, 2.f), db_in(cols, 2.f);
        be.BiasActivationForwardKeepGrad(act, rows, cols, with_bias ? bias.data() : nullptr,
                                         z.data(), y.data());
        be.BiasActivationBackwardFromGrad(rows, cols, z.data(), dy.data(), dz.data(), db.data(),
                                          0.5f);
        be.BiasActivationBackwardFromGrad(rows, cols, z.data(), inplace.data(), inplace.data(),
                                          db_in.data(), 0.5f);
        for (int c = 0; c < cols; ++c) {
          double col = 0;
          for (int r = 0; r < rows; ++r) {
            const int i = r * cols + c;
            const double pre = static_cast<double>(z0[i]) + (with_bias ? bias[c] : 0.f);
            const double ref = Act(act, pre), g = ActGrad(act, pre);
            ASSERT_NEAR(y[i], ref, 2e-6 + 2e-6 * std::fabs(ref)) << pre;
            ASSERT_NEAR(z[i], g, 4e-6 + 4e-6 * std::fabs(g)) << pre;
            ASSERT_NEAR(dz[i], dy[i] * g, 4e-6) << pre;
            ASSERT_EQ(inplace[i], dz[i]);
            ASSERT_TRUE(NotDenormal(y[i]) && NotDenormal(z[i])) << pre;
            col += dz[i];
          }
          EXPECT_NEAR(db[c], 1.0 + col, 1e-5);
          EXPECT_EQ(db_in[c], db[c]);
        }
      }
    }
  }
  numeric::ForceBaselineVectorWidth(false);
}

// dbias_beta 0 ignores garbage (NaN) in the old bias gradient; a null dbias
// is allowed.
TEST(CpuActivationTest, FromGradBackwardOverwritesGarbageBiasGradient) {
  CpuBackend be;
  const int rows = 3, cols = 17;
  std::vector<float> g = Random(rows * cols, 4, 0.f, 1.f), dy = Random(rows * cols, 5, -1.f, 1.f);
  std::vector<float> dz(rows * cols), db(cols, std::numeric_limits<float>::quiet_NaN());
  be.BiasActivationBackwardFromGrad(rows, cols, g.data(), dy.data(), dz.data(), db.data(), 0.f);
  for (int c = 0; c < cols; ++c) {
    double col = 0;
    for (int r = 0; r < rows; ++r) col += static_cast<double>(dy[r * cols + c]) * g[r * cols + c];
    EXPECT_NEAR(db[c], col, 1e-5);
  }
  be.BiasActivationBackwardFromGrad(rows, cols, g.data(), dy.data(), dz.data(), nullptr, 0.f);
  EXPECT_FLOAT_EQ(dz[4], dy[4] * g[4]);
}

}  // namespace
}  // namespace kernels
}  // namespace tandem
