#include "common/optim/clip.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace optim {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(ClipTest, SumOfSquaresMatchesDirectSum) {
  for (int64_t n : {0, 1, 3, 4, 5, 1001}) {
    const std::vector<float> g = RandomVector(n, n + 1, 2.0f);
    long double ref = 0;
    for (float x : g) ref += static_cast<long double>(x) * x;
    EXPECT_NEAR(PartialSumOfSquares(g), static_cast<double>(ref),
                1e-12 * static_cast<double>(ref) + 1e-300)
        << n;
  }
}

// Each "rank" sums its own range; the sums are added (as an allreduce
// would) and every rank computes the factor from the same total.
TEST(ClipTest, ShardedNormAndFactorMatchUnsharded) {
  const int64_t n = 10007;
  const std::vector<float> g = RandomVector(n, 42, 0.5f);
  const double full = PartialSumOfSquares(g);
  auto unsharded = ComputeClip(full, 1.0);
  ASSERT_TRUE(unsharded.ok());
  ASSERT_TRUE(unsharded->clipped);
  for (const std::vector<int64_t>& cuts :
       std::vector<std::vector<int64_t>>{{0, 1, n}, {0, 3, 2500, 7777, n},
                                         {0, 1000, 2000, 3000, 4000, n}}) {
    double total = 0;
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      total += PartialSumOfSquares(absl::MakeConstSpan(g).subspan(
          cuts[s], cuts[s + 1] - cuts[s]));
    }
    auto sharded = ComputeClip(total, 1.0);
    ASSERT_TRUE(sharded.ok());
    EXPECT_NEAR(sharded->global_norm, unsharded->global_norm,
                1e-13 * unsharded->global_norm);
    EXPECT_NEAR(sharded->scale, unsharded->scale, 1e-7f * unsharded->scale);
    EXPECT_TRUE(sharded->clipped);
    // Applying the factor per range gives the clipped unsharded vector.
    std::vector<float> a = g, b = g;
    ScaleInPlace(absl::MakeSpan(a), unsharded->scale);
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      ScaleInPlace(absl::MakeSpan(b).subspan(cuts[s], cuts[s + 1] - cuts[s]),
                   sharded->scale);
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(a[i], b[i], 1e-6f * std::fabs(a[i]) + 1e-30f);
  }
}

TEST(ClipTest, FactorBringsNormToMaxNorm) {
  // g = (3, 4): norm 5; clip to 1 -> scale ~0.2, clipped norm ~1.
  std::vector<float> g = {3.0f, 4.0f};
  auto c = ComputeClip(PartialSumOfSquares(g), 1.0);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->global_norm, 5.0);
  EXPECT_TRUE(c->clipped);
  ScaleInPlace(absl::MakeSpan(g), c->scale);
  EXPECT_NEAR(std::sqrt(PartialSumOfSquares(g)), 1.0, 1e-6);
}

TEST(ClipTest, BelowMaxNormOrDisabledLeavesScaleOne) {
  auto below = ComputeClip(25.0, 10.0);
  ASSERT_TRUE(below.ok());
  EXPECT_FALSE(below->clipped);
  EXPECT_EQ(below->scale, 1.0f);
  auto disabled = ComputeClip(1e6, 0.0);
  ASSERT_TRUE(disabled.ok());
  EXPECT_FALSE(disabled->clipped);
  EXPECT_DOUBLE_EQ(disabled->global_norm, 1000.0);
}

TEST(ClipTest, NonFiniteNormIsAnError) {
  const double inf = std::numeric_limits<double>::infinity();
  auto s = ComputeClip(inf, 1.0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("inf/NaN"), absl::string_view::npos);
  EXPECT_FALSE(ComputeClip(std::nan(""), 1.0).ok());
  EXPECT_EQ(ComputeClip(1.0, inf).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> g = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_FALSE(ComputeClip(PartialSumOfSquares(g), 1.0).ok());
}

}  // namespace
}  // namespace optim
}  // namespace tandem
