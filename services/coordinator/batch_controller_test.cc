#include "services/coordinator/batch_controller.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// Step time 0.1 s + 1 ms per sample: throughput grows with the batch and
// saturates at 1000 samples/s.
class FakeThroughput final : public ThroughputModel {
 public:
  double SamplesPerSecond(int64_t m) const override {
    return static_cast<double>(m) / (0.1 + 0.001 * static_cast<double>(m));
  }
};

// Norms as a gradient with |G|^2 = g2 and noise S gives them at batch b:
// E|g_b|^2 = |G|^2 + S / b.
BatchObservation Report(int64_t local, int world, double g2, double s, double rate = 0) {
  BatchObservation o;
  o.local_batch = local;
  o.global_batch = local * world;
  o.samples_per_second = rate;
  o.local_grad_sq = g2 + s / static_cast<double>(local);
  o.global_grad_sq = g2 + s / static_cast<double>(local * world);
  return o;
}

BatchControllerOptions Options() {
  BatchControllerOptions o;
  o.min_global_batch = 32;
  o.max_global_batch = 1024;
  o.reference_batch = 128;
  o.reports_per_decision = 3;
  return o;
}

TEST(BatchControllerTest, ChoosesTheGoodputMaximumOfTheThroughputModel) {
  BatchController c(Options());
  for (int i = 0; i < 5; ++i) c.Observe(Report(32, 4, 1.0, 500.0));
  EXPECT_NEAR(c.noise_scale(), 500.0, 1e-6);
  FakeThroughput model;
  const BatchDecision d = c.Decide(model, 4);
  // Brute force over the candidates (multiples of 4 in [32, 1024]).
  int64_t best = 0;
  double best_goodput = -1;
  for (int64_t m = 32; m <= 1024; m += 4) {
    const double g = model.SamplesPerSecond(m) * (500.0 + 128) / (500.0 + m);
    if (g > best_goodput) {
      best_goodput = g;
      best = m;
    }
  }
  EXPECT_EQ(d.global_batch, best);
  EXPECT_TRUE(d.changed);
  EXPECT_NEAR(d.goodput, best_goodput, 1e-9);
  EXPECT_NEAR(d.efficiency, (500.0 + 128) / (500.0 + best), 1e-12);
  // The maximum is inside the range: sqrt(0.1 x 500 / 0.001) ~ 224, not an
  // end point, so neither "as large" nor "as small as allowed" would pass.
  EXPECT_GT(d.global_batch, 200);
  EXPECT_LT(d.global_batch, 250);
  EXPECT_EQ(d.global_batch % 4, 0);
}

TEST(BatchControllerTest, MoreNoiseMeansALargerBatch) {
  FakeThroughput model;
  int64_t previous = 0;
  for (double s : {50.0, 500.0, 5000.0}) {
    BatchController c(Options());
    for (int i = 0; i < 3; ++i) c.Observe(Report(32, 2, 1.0, s));
    const BatchDecision d = c.Decide(model, 2);
    EXPECT_GT(d.global_batch, previous) << "S " << s;
    previous = d.global_batch;
  }
}

TEST(BatchControllerTest, KeepsTheBatchUntilSettledAndForASmallGain) {
  FakeThroughput model;
  BatchController c(Options());
  c.Observe(Report(32, 4, 1.0, 500.0));
  BatchDecision d = c.Decide(model, 4);
  EXPECT_FALSE(d.changed);  // one report at 128: not settled yet
  EXPECT_EQ(d.global_batch, 128);
  c.Observe(Report(32, 4, 1.0, 500.0));
  c.Observe(Report(32, 4, 1.0, 500.0));
  EXPECT_TRUE(c.Decide(model, 4).changed);
  // Already at the maximum: nothing to gain.
  BatchController at(Options());
  for (int i = 0; i < 3; ++i) at.Observe(Report(56, 4, 1.0, 500.0));  // 224
  const BatchDecision stay = at.Decide(model, 4);
  EXPECT_FALSE(stay.changed);
  EXPECT_EQ(stay.global_batch, 224);
}

TEST(BatchControllerTest, WithoutANoiseEstimateThroughputDecides) {
  // World 1 gives no second batch size: efficiency 1, so the largest
  // batch (highest throughput) wins.
  BatchController c(Options());
  for (int i = 0; i < 3; ++i) c.Observe(Report(64, 1, 1.0, 500.0));
  EXPECT_LT(c.noise_scale(), 0);
  EXPECT_EQ(c.Decide(FakeThroughput(), 3).global_batch, 1023);  // largest multiple of 3
}

TEST(BatchControllerTest, FittedThroughputRecoversTheStepTimeLine) {
  FakeThroughput truth;
  FittedThroughput fit({{64, truth.SamplesPerSecond(64)}, {256, truth.SamplesPerSecond(256)}},
                       0.3);
  EXPECT_NEAR(fit.fixed_seconds(), 0.1, 1e-9);
  EXPECT_NEAR(fit.seconds_per_sample(), 0.001, 1e-12);
  EXPECT_NEAR(fit.SamplesPerSecond(500), truth.SamplesPerSecond(500), 1e-6);
  // One size: the prior splits its step time 30 / 70.
  FittedThroughput one({{100, 500.0}}, 0.3);  // 0.2 s per step
  EXPECT_NEAR(one.fixed_seconds(), 0.06, 1e-12);
  EXPECT_NEAR(one.SamplesPerSecond(100), 500.0, 1e-9);
  EXPECT_GT(one.SamplesPerSecond(200), 500.0);
  // The controller's own fit from reports.
  BatchController c(Options());
  c.Observe(Report(32, 2, 1, 100, truth.SamplesPerSecond(64)));
  c.Observe(Report(128, 2, 1, 100, truth.SamplesPerSecond(256)));
  EXPECT_NEAR(c.Fitted().seconds_per_sample(), 0.001, 1e-12);
}

TEST(BatchControllerTest, BadOptionsSayWhatToFix) {
  BatchControllerOptions o = Options();
  o.min_global_batch = 200;
  o.max_global_batch = 100;
  absl::Status s = ValidateBatchControllerOptions(o);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("MIN <= MAX"), std::string::npos) << s;
  EXPECT_TRUE(ValidateBatchControllerOptions(Options()).ok());
}

}  // namespace
}  // namespace tandem
