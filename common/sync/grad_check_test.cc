// CheckGradients: nothing computed unless asked; the measured sum; clipping
// as GradClip; a non-finite gradient on one shard makes every shard skip
// and name the same range (the one nearest the input); without skipping a
// non-finite norm is an error only when clipping needs it.
#include "common/sync/grad_check.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/clip.h"
#include "common/status/status_macros.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Ranges in backward order over 10 floats: [6,10) is the output layer,
// [0,3) the input layer.
const Ranges kRanges = {{6, 10}, {3, 6}, {0, 3}};

absl::StatusOr<GradCheck> Check(GradClip& clip, const StepOptions& o, const std::vector<float>& g,
                                optim::ParamRange owned, int* calls = nullptr) {
  return CheckGradients(clip, o, 1.0, owned, kRanges,
                        [&](int64_t lo, int64_t hi) -> absl::StatusOr<double> {
                          if (calls != nullptr) ++*calls;
                          return optim::PartialSumOfSquares(
                              absl::MakeConstSpan(g.data() + lo, hi - lo));
                        });
}

TEST(CheckGradients, ComputesNothingUnlessAsked) {
  GradClip clip = *GradClip::Create({0, nullptr});
  std::vector<float> g(10, std::nanf(""));
  int calls = 0;
  absl::StatusOr<GradCheck> c = Check(clip, StepOptions{}, g, {0, 10}, &calls);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(c->report.applied);
  EXPECT_LT(c->report.grad_sum_sq, 0);
  EXPECT_EQ(c->clip_scale, 1);
}

TEST(CheckGradients, MeasuresTheSumAndClips) {
  std::vector<float> g(10, 0.f);
  g[0] = 3;
  g[9] = 4;
  StepOptions o;
  o.measure_grad_norm = true;
  GradClip off = *GradClip::Create({0, nullptr});
  absl::StatusOr<GradCheck> c = Check(off, o, g, {0, 10});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report.grad_sum_sq, 25.0);
  EXPECT_EQ(c->clip_scale, 1);
  GradClip on = *GradClip::Create({1.0, nullptr});
  c = Check(on, StepOptions{}, g, {0, 10});  // clipping measures by itself
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->report.grad_sum_sq, 25.0);
  EXPECT_EQ(c->clip_scale, optim::ComputeClip(25.0, 1.0)->scale);
  EXPECT_NEAR(c->clip_scale, 0.2, 1e-6);
}

TEST(CheckGradients, SkipsAndNamesTheRangeNearestTheInput) {
  GradClip clip = *GradClip::Create({0, nullptr});
  std::vector<float> g(10, 1.f);
  g[7] = std::numeric_limits<float>::infinity();  // output layer
  g[4] = std::nanf("");                             // middle layer
  StepOptions o;
  o.skip_non_finite = true;
  absl::StatusOr<GradCheck> c = Check(clip, o, g, {0, 10});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->report.applied);
  EXPECT_EQ(c->report.first_non_finite_range, 1);  // [3,6), nearer the input than [6,10)
  EXPECT_FALSE(std::isfinite(c->report.grad_sum_sq));
  // Finite gradients: applied.
  g[7] = g[4] = 2.f;
  c = Check(clip, o, g, {0, 10});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->report.applied);
  EXPECT_EQ(c->report.first_non_finite_range, -1);
  EXPECT_EQ(c->report.grad_sum_sq, 8 * 1.0 + 2 * 4.0);
}

TEST(CheckGradients, NonFiniteWithoutSkipIsAnErrorOnlyWhenClipping) {
  std::vector<float> g(10, 1.f);
  g[2] = std::numeric_limits<float>::infinity();
  GradClip on = *GradClip::Create({1.0, nullptr});
  EXPECT_EQ(Check(on, StepOptions{}, g, {0, 10}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  GradClip off = *GradClip::Create({0, nullptr});
  StepOptions o;
  o.measure_grad_norm = true;
  absl::StatusOr<GradCheck> c = Check(off, o, g, {0, 10});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->report.applied);
  EXPECT_FALSE(std::isfinite(c->report.grad_sum_sq));
}

// Three shards of [0, 10): [0,4) [4,7) [7,10), each checked by its own
// Gloo rank with skipping on.
std::vector<GradCheck> CheckOnThreeShards(const std::vector<float>& g) {
  constexpr int kWorld = 3;
  const optim::ParamRange owned[kWorld] = {{0, 4}, {4, 7}, {7, 10}};
  std::vector<GradCheck> out(kWorld);
  auto statuses = comm_testing::RunGlooRanks(kWorld, [&](int rank, Communicator& comm) -> absl::Status {
    ASSIGN_OR_RETURN(GradClip clip, GradClip::Create({0, &comm}));
    StepOptions o;
    o.skip_non_finite = true;
    ASSIGN_OR_RETURN(out[rank], Check(clip, o, g, owned[rank]));
    return absl::OkStatus();
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(statuses[r].ok()) << statuses[r];
  return out;
}

// Only rank 2 (owning the output layer's tail) sees an inf, only rank 0 a
// NaN in the input layer: every rank skips and names the input layer.
TEST(CheckGradients, ShardsAgreeOnSkipAndRange) {
  for (bool input_nan : {true, false}) {
    std::vector<float> g(10, 1.f);
    g[8] = std::numeric_limits<float>::infinity();
    if (input_nan) g[1] = std::nanf("");
    const std::vector<GradCheck> out = CheckOnThreeShards(g);
    for (int r = 0; r < 3; ++r) {
      EXPECT_FALSE(out[r].report.applied) << "rank " << r;
      EXPECT_EQ(out[r].report.first_non_finite_range, input_nan ? 2 : 0) << "rank " << r;
    }
  }
  // All finite: every rank applies and sees the whole vector's sum.
  const std::vector<GradCheck> out = CheckOnThreeShards(std::vector<float>(10, 2.f));
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(out[r].report.applied);
    EXPECT_EQ(out[r].report.grad_sum_sq, 40.0);
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
