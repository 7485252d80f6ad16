// StepPrecision: gradient rounding per mode (fp16 overflows to inf beyond
// its range, bf16 keeps the range and drops mantissa), the step options it
// gives the sync (1 / (k * scale), skip on), the loss scale's back-off and
// growth, the error after K skips in a row naming the layer, fault
// injection by step and rank, the state round trip, and flag errors.
#include "services/worker/step_precision.h"

#include <cmath>
#include <memory>

#include "absl/strings/match.h"
#include "common/kernels/cpu_backend.h"
#include "common/status/status_macros.h"
#include "gtest/gtest.h"
#include "services/worker/trainer_options.h"

namespace tandem {
namespace worker {
namespace {

struct Fixture {
  kernels::CpuBackend backend;
  std::unique_ptr<nn::Model> model;
  Fixture() {
    nn::ModelOptions mo;
    mo.max_batch = 4;
    model = *nn::CreateModel("mlp:8,4,3", &backend, mo);
  }
  std::vector<nn::GradRange> ranges() const { return nn::GroupRanges(model->layout()); }
  float* grads() { return model->storage().grads(); }
};

std::unique_ptr<StepPrecision> Make(Fixture& f, Precision p, int64_t max_skips = 3) {
  StepPrecisionOptions o;
  o.precision = p;
  o.max_non_finite_steps = max_skips;
  o.initial_loss_scale = 1024;
  o.loss_scale_growth_interval = 2;
  o.inject_non_finite = {{5, 1}, {6, -1}};
  absl::StatusOr<std::unique_ptr<StepPrecision>> s = StepPrecision::Create(o, &f.backend, f.model.get());
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

TEST(StepPrecision, RoundsEachRangeToTheModesPrecision) {
  Fixture f;
  const nn::GradRange r = f.ranges()[0];
  const float in[3] = {70000.f, 1.0f + 1.0f / 1024, 1.0e-8f};
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    std::unique_ptr<StepPrecision> s = Make(f, p);
    std::copy(in, in + 3, f.grads() + r.lo);
    s->OnRange(1, r);
    const float* g = f.grads() + r.lo;
    if (p == Precision::kFp32) {
      EXPECT_EQ(g[0], in[0]);
      EXPECT_EQ(g[1], in[1]);
    } else if (p == Precision::kBf16) {
      EXPECT_NEAR(g[0], 70000.f, 70000.f / 128);  // in range, 8 bits of mantissa
      EXPECT_EQ(g[1], 1.0f);                      // 1 + 2^-10 is below bf16's step
      EXPECT_GT(g[2], 0.f);                       // fp32's range
    } else {
      EXPECT_TRUE(std::isinf(g[0]));              // beyond fp16's 65504
      EXPECT_EQ(g[1], in[1]);                     // exact in fp16
      EXPECT_EQ(g[2], 0.f);                       // below fp16's subnormals
    }
  }
}

TEST(StepPrecision, StepOptionsUnscaleAndAskForTheCheck) {
  Fixture f;
  std::unique_ptr<StepPrecision> fp16 = Make(f, Precision::kFp16);
  EXPECT_EQ(fp16->loss_scale(), 1024.f);
  sync::StepOptions o = fp16->StepOptionsFor(4);
  EXPECT_EQ(o.grad_scale, 1.f / 4096);
  EXPECT_TRUE(o.skip_non_finite);
  std::unique_ptr<StepPrecision> fp32 = Make(f, Precision::kFp32);
  EXPECT_EQ(fp32->loss_scale(), 1.f);
  EXPECT_EQ(fp32->StepOptionsFor(2).grad_scale, 0.5f);
}

TEST(StepPrecision, SkipsHalveTheScaleCleanStepsGrowItAndKInARowStop) {
  Fixture f;
  std::unique_ptr<StepPrecision> s = Make(f, Precision::kFp16, /*max_skips=*/3);
  sync::StepReport bad;
  bad.applied = false;
  bad.first_non_finite_range = static_cast<int>(f.ranges().size()) - 1;  // the input layer
  absl::StatusOr<StepVerdict> v = s->AfterStep(1, bad);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_FALSE(v->applied);
  EXPECT_EQ(v->skipped_because,
            "non-finite gradients (first in layer fc0); loss scale 1024 -> 512");
  EXPECT_EQ(s->loss_scale(), 512.f);
  // Two clean steps (growth interval 2): back to 1024.
  ASSERT_TRUE(s->AfterStep(2, sync::StepReport{}).ok());
  ASSERT_TRUE(s->AfterStep(3, sync::StepReport{}).ok());
  EXPECT_EQ(s->loss_scale(), 1024.f);
  // Three in a row: the third is the error, naming the first bad layer.
  ASSERT_TRUE(s->AfterStep(4, bad).ok());
  sync::StepReport bad_out = bad;
  bad_out.first_non_finite_range = 0;  // the output layer
  ASSERT_TRUE(s->AfterStep(5, bad_out).ok());
  v = s->AfterStep(6, bad_out);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(v.status().message(), "3 steps in a row")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "first in layer fc0 (fc1 this step)"))
      << v.status();
  EXPECT_EQ(s->skipped_steps(), 4);
}

TEST(StepPrecision, InjectsByStepAndRankIntoTheFirstReportedRange) {
  Fixture f;
  std::unique_ptr<StepPrecision> s = Make(f, Precision::kFp32);
  const nn::GradRange first = f.ranges()[0];
  const nn::GradRange second = f.ranges()[1];
  auto poisoned = [&](int64_t step, int rank, const nn::GradRange& r) {
    std::fill(f.grads(), f.grads() + f.model->storage().size(), 1.f);
    s->set_rank(rank);
    s->OnRange(step, r);
    return std::isinf(f.grads()[r.lo]);
  };
  EXPECT_FALSE(poisoned(5, 0, first));   // {5, 1}: rank 1 only
  EXPECT_TRUE(poisoned(5, 1, first));
  EXPECT_TRUE(poisoned(6, 0, first));    // {6, -1}: every rank
  EXPECT_FALSE(poisoned(6, 0, second));  // only the first range backward reports
  EXPECT_FALSE(poisoned(7, 1, first));
}

TEST(StepPrecision, LossScalerStateRoundTrips) {
  Fixture f;
  std::unique_ptr<StepPrecision> a = Make(f, Precision::kFp16);
  sync::StepReport bad;
  bad.applied = false;
  ASSERT_TRUE(a->AfterStep(1, bad).ok());
  std::unique_ptr<StepPrecision> b = Make(f, Precision::kFp16);
  ASSERT_TRUE(b->RestoreState(a->SerializeState()).ok());
  EXPECT_EQ(b->loss_scale(), 512.f);
  EXPECT_TRUE(b->RestoreState("").ok());  // a checkpoint of another mode
  EXPECT_FALSE(b->RestoreState("garbage").ok());
  EXPECT_TRUE(Make(f, Precision::kFp32)->SerializeState().empty());
}

TEST(StepPrecision, FlagErrorsNameTheFlag) {
  TrainerOptions o;
  o.precision = "fp8";
  EXPECT_TRUE(absl::StrContains(MakeStepPrecisionOptions(o).status().message(), "--precision"));
  o.precision = "fp16";
  o.check_nonfinite = false;
  EXPECT_TRUE(absl::StrContains(MakeStepPrecisionOptions(o).status().message(),
                                "--check_nonfinite"));
  o.check_nonfinite = true;
  o.loss_scale = 0;
  EXPECT_TRUE(absl::StrContains(MakeStepPrecisionOptions(o).status().message(), "--loss_scale"));
  o.loss_scale = 8;
  o.inject_nonfinite = "3@x";
  EXPECT_TRUE(absl::StrContains(MakeStepPrecisionOptions(o).status().message(),
                                "--inject_nonfinite"));
  o.inject_nonfinite = "3@1:7";
  absl::StatusOr<StepPrecisionOptions> p = MakeStepPrecisionOptions(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->inject_non_finite.size(), 2u);
  EXPECT_EQ(p->inject_non_finite[1], (std::pair<int64_t, int>{7, -1}));
  o.sync.strategy = "ps";
  EXPECT_TRUE(absl::StrContains(MakeStepPrecisionOptions(o).status().message(), "--sync ps"));
  o.sync.strategy = "allreduce";
  o.max_nonfinite_steps = 0;
  EXPECT_TRUE(absl::StrContains(MakeStepPrecisionOptions(o).status().message(),
                                "--max_nonfinite_steps"));
}

}  // namespace
}  // namespace worker
}  // namespace tandem
