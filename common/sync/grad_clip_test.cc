// GradClip: off, the unsharded factor (bit for bit optim::ComputeClip of the
// scaled sum), bad options, non-finite norms, and the sharded total over
// Gloo ranks: every rank gets the same factor, equal to the unsharded one.
#include "common/sync/grad_clip.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/comm/testing/gloo_ranks.h"
#include "common/status/status_macros.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

TEST(GradClip, OffMeansFactorOneWithoutComputing) {
  absl::StatusOr<GradClip> clip = GradClip::Create({0, nullptr});
  ASSERT_TRUE(clip.ok());
  EXPECT_FALSE(clip->enabled());
  absl::StatusOr<optim::ClipResult> r = clip->Compute(1e6, 1.0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scale, 1.f);
  EXPECT_FALSE(r->clipped);
}

TEST(GradClip, UnshardedFactorIsComputeClipOfTheScaledSum) {
  absl::StatusOr<GradClip> clip = GradClip::Create({1.0, nullptr});
  ASSERT_TRUE(clip.ok());
  EXPECT_TRUE(clip->enabled());
  // Summed gradients (3, 4) over 2 ranks, scale 1/2: averaged norm 2.5.
  absl::StatusOr<optim::ClipResult> r = clip->Compute(25.0, 0.5);
  ASSERT_TRUE(r.ok()) << r.status();
  const optim::ClipResult expected = *optim::ComputeClip(25.0 * 0.5 * 0.5, 1.0);
  EXPECT_EQ(r->scale, expected.scale);
  EXPECT_TRUE(r->clipped);
  EXPECT_NEAR(r->global_norm, 2.5, 1e-12);
  EXPECT_NEAR(r->scale, 1.0 / 2.5, 1e-6);
  // Under the limit: not clipped.
  r = clip->Compute(0.25, 1.0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->scale, 1.f);
  EXPECT_FALSE(r->clipped);
}

TEST(GradClip, BadOptionsAndNonFiniteNorms) {
  EXPECT_EQ(GradClip::Create({-1, nullptr}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GradClip::Create({std::nan(""), nullptr}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<GradClip> clip = GradClip::Create({1.0, nullptr});
  ASSERT_TRUE(clip.ok());
  EXPECT_EQ(clip->Compute(std::numeric_limits<double>::infinity(), 1.0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GradClip, ShardedSumIsTheSameOnEveryRankAndMatchesTheWholeVector) {
  constexpr int kWorld = 3;
  const double local[kWorld] = {1.5, 20.25, 0.125};
  const double scale = 1.0 / kWorld;
  std::vector<optim::ClipResult> results(kWorld);
  auto statuses = comm_testing::RunGlooRanks(
      kWorld,
      [&](int rank, Communicator& comm) -> absl::Status {
        ASSIGN_OR_RETURN(GradClip clip, GradClip::Create({1.0, &comm}));
        ASSIGN_OR_RETURN(results[rank], clip.Compute(local[rank], scale));
        return absl::OkStatus();
      });
  for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(statuses[r].ok()) << statuses[r];
  const double total = local[0] + local[1] + local[2];
  const optim::ClipResult whole = *optim::ComputeClip(total * scale * scale, 1.0);
  ASSERT_TRUE(whole.clipped);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(results[r].scale, whole.scale) << "rank " << r;
    EXPECT_EQ(results[r].global_norm, whole.global_norm) << "rank " << r;
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
