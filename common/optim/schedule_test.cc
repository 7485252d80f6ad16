#include "common/optim/schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tandem {
namespace optim {
namespace {

LrSchedule Make(const LrScheduleOptions& o) {
  auto s = LrSchedule::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(ScheduleTest, ConstantWithAndWithoutWarmup) {
  LrScheduleOptions o;
  o.base_lr = 0.1;
  LrSchedule s = Make(o);
  EXPECT_FLOAT_EQ(s.LearningRate(1), 0.1f);
  EXPECT_FLOAT_EQ(s.LearningRate(1000000), 0.1f);
  o.warmup_steps = 10;
  LrSchedule w = Make(o);
  EXPECT_FLOAT_EQ(w.LearningRate(1), 0.01f);
  EXPECT_FLOAT_EQ(w.LearningRate(5), 0.05f);
  EXPECT_FLOAT_EQ(w.LearningRate(10), 0.1f);
  EXPECT_FLOAT_EQ(w.LearningRate(11), 0.1f);
}

TEST(ScheduleTest, WarmupCosineAtKeySteps) {
  LrScheduleOptions o;
  o.kind = ScheduleKind::kWarmupCosine;
  o.base_lr = 1.0;
  o.final_lr = 0.1;
  o.warmup_steps = 100;
  o.total_steps = 1100;
  LrSchedule s = Make(o);
  EXPECT_FLOAT_EQ(s.LearningRate(0), 0.01f);  // clamped to step 1
  EXPECT_FLOAT_EQ(s.LearningRate(1), 0.01f);
  EXPECT_FLOAT_EQ(s.LearningRate(50), 0.5f);
  EXPECT_FLOAT_EQ(s.LearningRate(100), 1.0f);  // peak
  EXPECT_FLOAT_EQ(s.LearningRate(600), 0.55f);  // half-way: cos(pi/2) = 0
  EXPECT_FLOAT_EQ(s.LearningRate(350),
                  static_cast<float>(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 4))));
  EXPECT_FLOAT_EQ(s.LearningRate(1100), 0.1f);
  EXPECT_FLOAT_EQ(s.LearningRate(5000), 0.1f);  // holds the end value
  // Monotone non-increasing after the peak.
  for (int64_t t = 101; t <= 1100; ++t) {
    ASSERT_LE(s.LearningRate(t), s.LearningRate(t - 1)) << t;
  }
}

TEST(ScheduleTest, WarmupLinearAtKeySteps) {
  LrScheduleOptions o;
  o.kind = ScheduleKind::kWarmupLinear;
  o.base_lr = 2.0;
  o.final_lr = 0.0;
  o.warmup_steps = 0;
  o.total_steps = 200;
  LrSchedule s = Make(o);
  EXPECT_FLOAT_EQ(s.LearningRate(1), 2.0f * (1.0f - 1.0f / 200));
  EXPECT_FLOAT_EQ(s.LearningRate(100), 1.0f);
  EXPECT_FLOAT_EQ(s.LearningRate(150), 0.5f);
  EXPECT_FLOAT_EQ(s.LearningRate(200), 0.0f);
  EXPECT_FLOAT_EQ(s.LearningRate(201), 0.0f);
}

TEST(ScheduleTest, RejectsInconsistentOptions) {
  LrScheduleOptions o;
  o.base_lr = 0;
  EXPECT_EQ(LrSchedule::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.base_lr = 0.1;
  o.kind = ScheduleKind::kWarmupCosine;
  o.warmup_steps = 10;
  o.total_steps = 10;
  auto st = LrSchedule::Create(o).status();
  EXPECT_NE(st.message().find("total_steps"), absl::string_view::npos);
  o.total_steps = 20;
  o.final_lr = 0.2;
  EXPECT_FALSE(LrSchedule::Create(o).ok());
  o.final_lr = 0;
  o.warmup_steps = -1;
  EXPECT_FALSE(LrSchedule::Create(o).ok());
}

TEST(ScheduleTest, ParsesNames) {
  EXPECT_EQ(*ParseScheduleKind("cosine"), ScheduleKind::kWarmupCosine);
  EXPECT_EQ(*ParseScheduleKind("linear"), ScheduleKind::kWarmupLinear);
  EXPECT_EQ(*ParseScheduleKind("constant"), ScheduleKind::kConstant);
  EXPECT_FALSE(ParseScheduleKind("step").ok());
  EXPECT_EQ(*ParseScalingRule("sqrt"), ScalingRule::kSqrt);
  EXPECT_EQ(*ParseScalingRule("linear"), ScalingRule::kLinear);
  EXPECT_EQ(*ParseScalingRule("none"), ScalingRule::kNone);
  EXPECT_FALSE(ParseScalingRule("log").ok());
}

TEST(ScheduleTest, WorldSizeScaling) {
  EXPECT_DOUBLE_EQ(*ScaleLearningRate(0.1, 8, ScalingRule::kLinear), 0.8);
  EXPECT_DOUBLE_EQ(*ScaleLearningRate(0.1, 16, ScalingRule::kSqrt), 0.4);
  EXPECT_DOUBLE_EQ(*ScaleLearningRate(0.1, 16, ScalingRule::kNone), 0.1);
  EXPECT_DOUBLE_EQ(*ScaleLearningRate(0.1, 0.25, ScalingRule::kSqrt), 0.05);
  EXPECT_FALSE(ScaleLearningRate(0.1, 0, ScalingRule::kLinear).ok());
  EXPECT_FALSE(ScaleLearningRate(0.1, -4, ScalingRule::kSqrt).ok());
}

}  // namespace
}  // namespace optim
}  // namespace tandem
