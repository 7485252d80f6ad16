#include "common/optim/loss_scaler.h"

#include "gtest/gtest.h"

namespace tandem {
namespace optim {
namespace {

DynamicLossScaler Make(const LossScalerOptions& o) {
  auto s = DynamicLossScaler::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LossScalerTest, SkipsAndBacksOffOnNonFinite) {
  LossScalerOptions o;
  o.initial_scale = 1024;
  DynamicLossScaler s = Make(o);
  EXPECT_EQ(s.scale(), 1024.0f);
  auto d = s.Update(/*found_non_finite=*/true);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, LossScaleDecision::kSkip);
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.inverse_scale_of_last_step(), 1.0f / 1024);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_EQ(s.applied_steps(), 0);
  EXPECT_EQ(s.consecutive_skips(), 1);
  ASSERT_EQ(*s.Update(true), LossScaleDecision::kSkip);
  EXPECT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.consecutive_skips(), 2);
  ASSERT_EQ(*s.Update(false), LossScaleDecision::kApply);
  EXPECT_EQ(s.inverse_scale_of_last_step(), 1.0f / 256);
  EXPECT_EQ(s.consecutive_skips(), 0);
  EXPECT_EQ(s.skipped_steps(), 2);
  EXPECT_EQ(s.applied_steps(), 1);
}

TEST(LossScalerTest, GrowsAfterIntervalOfGoodSteps) {
  LossScalerOptions o;
  o.initial_scale = 8;
  o.growth_interval = 3;
  o.max_scale = 32;
  DynamicLossScaler s = Make(o);
  ASSERT_EQ(*s.Update(false), LossScaleDecision::kApply);
  ASSERT_EQ(*s.Update(false), LossScaleDecision::kApply);
  EXPECT_EQ(s.scale(), 8.0f);
  ASSERT_EQ(*s.Update(false), LossScaleDecision::kApply);
  EXPECT_EQ(s.scale(), 16.0f);  // grew after 3
  EXPECT_EQ(s.inverse_scale_of_last_step(), 1.0f / 8);  // step used 8
  // An overflow restarts the growth count.
  ASSERT_EQ(*s.Update(false), LossScaleDecision::kApply);
  ASSERT_EQ(*s.Update(false), LossScaleDecision::kApply);
  ASSERT_EQ(*s.Update(true), LossScaleDecision::kSkip);
  EXPECT_EQ(s.scale(), 8.0f);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.Update(false).ok());
  EXPECT_EQ(s.scale(), 16.0f);
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(s.Update(false).ok());
  EXPECT_EQ(s.scale(), 32.0f);  // capped at max_scale
}

TEST(LossScalerTest, NeverGoesBelowMinScaleAndGivesUpAfterTooManySkips) {
  LossScalerOptions o;
  o.initial_scale = 4;
  o.min_scale = 1;
  o.max_consecutive_skips = 5;
  DynamicLossScaler s = Make(o);
  for (int i = 0; i < 4; ++i) {
    auto d = s.Update(true);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, LossScaleDecision::kSkip);
  }
  EXPECT_EQ(s.scale(), 1.0f);
  auto last = s.Update(true);
  EXPECT_EQ(last.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(last.status().message().find("5 steps in a row"),
            absl::string_view::npos);
  EXPECT_EQ(s.skipped_steps(), 5);
}

TEST(LossScalerTest, StateRoundTripsAndBadStateIsRefused) {
  LossScalerOptions o;
  o.growth_interval = 10;
  DynamicLossScaler a = Make(o);
  ASSERT_TRUE(a.Update(true).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a.Update(false).ok());
  const std::string bytes = a.SerializeState();
  DynamicLossScaler b = Make(o);
  ASSERT_TRUE(b.RestoreState(bytes).ok());
  EXPECT_EQ(b.scale(), a.scale());
  EXPECT_EQ(b.skipped_steps(), 1);
  EXPECT_EQ(b.applied_steps(), 4);
  EXPECT_EQ(b.growth_tracker(), 4);
  EXPECT_EQ(b.SerializeState(), bytes);
  EXPECT_FALSE(b.RestoreState(bytes.substr(1)).ok());
  std::string bad = bytes;
  bad[0] = 'X';
  EXPECT_EQ(b.RestoreState(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LossScalerTest, RejectsBadOptions) {
  LossScalerOptions o;
  o.backoff_factor = 1.0f;
  auto st = DynamicLossScaler::Create(o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("backoff_factor"), absl::string_view::npos);
  o = LossScalerOptions();
  o.growth_factor = 1.0f;
  EXPECT_FALSE(DynamicLossScaler::Create(o).ok());
  o = LossScalerOptions();
  o.growth_interval = 0;
  EXPECT_FALSE(DynamicLossScaler::Create(o).ok());
  o = LossScalerOptions();
  o.max_scale = 1.0f;
  EXPECT_FALSE(DynamicLossScaler::Create(o).ok());
}

}  // namespace
}  // namespace optim
}  // namespace tandem
