// Error feedback's property, with random gradients over many steps for
// every codec: what was sent, summed, equals the sum of the true gradients
// minus the current residual (to fp32 rounding), so it tracks the true sum
// ever more closely in relative terms; the residual stays bounded (it does
// not grow with the number of steps). Without error feedback top-k loses
// almost all of the sum (top-k 1%: the residual settles near 11 gradients). Also the threshold controller's moves.
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "common/codec/codec_factory.h"
#include "common/codec/error_feedback.h"
#include "common/codec/sparse_block.h"
#include "common/codec/threshold_controller.h"
#include "gtest/gtest.h"

namespace tandem {
namespace codec {
namespace {

double Norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

struct EfRun {
  double relative_error = 0;   // |sum sent - sum true| / |sum true| at the end
  double identity_error = 0;   // |sum sent - (sum true - residual)| / |sum true|
  double max_residual = 0;     // max over steps of |residual|
  double residual_late = 0;    // mean |residual| over the last quarter
  double residual_mid = 0;     // mean |residual| over the second quarter
  double gradient_norm = 0;    // |one step's gradient|
};

// Gradients with a fixed direction (mean) plus noise: the true sum grows
// linearly with the steps.
EfRun Simulate(const std::string& name, bool feedback, int64_t n, int steps) {
  CodecConfig c;
  c.codec = name;
  c.k = 0.01;
  c.density = 0.01;
  c.chunk = 256;
  c.rounding = "stochastic";
  std::unique_ptr<Codec> codec = *CreateCodec(c);
  ErrorFeedback ef(codec.get(), n);
  ThresholdController tc(1, {0.01});
  std::mt19937 rng(99);
  std::normal_distribution<float> noise(0.f, 1.f);
  std::vector<float> mean(n);
  for (float& m : mean) m = 0.3f * noise(rng);
  std::vector<float> g(n), decoded(n), ws(codec->WorkspaceFloats(n));
  std::vector<uint8_t> block(codec->MaxEncodedBytes(n));
  std::vector<double> sum_true(n, 0), sum_sent(n, 0);
  EfRun run;
  for (int t = 0; t < steps; ++t) {
    for (int64_t i = 0; i < n; ++i) g[i] = mean[i] + noise(rng);
    EncodeParams p;
    p.seed = t;
    p.workspace = ws.data();
    p.threshold = tc.threshold(0);
    if (feedback) {
      ef.Encode(g.data(), 0, n, p, block.data());
    } else {
      codec->Encode(g.data(), n, p, block.data());
    }
    if (name == "threshold") tc.Update(0, block.data(), n);
    codec->Decode(block.data(), n, decoded.data());
    for (int64_t i = 0; i < n; ++i) {
      sum_true[i] += g[i];
      sum_sent[i] += decoded[i];
    }
    const double r = std::sqrt(ef.SumOfSquares(0, n));
    run.max_residual = std::max(run.max_residual, r);
    if (t >= steps / 4 && t < steps / 2) run.residual_mid += r / (steps / 4);
    if (t >= 3 * steps / 4) run.residual_late += r / (steps - 3 * steps / 4);
    if (t == 0) {
      double s = 0;
      for (float x : g) s += static_cast<double>(x) * x;
      run.gradient_norm = std::sqrt(s);
    }
  }
  std::vector<double> diff(n), ident(n);
  for (int64_t i = 0; i < n; ++i) {
    diff[i] = sum_sent[i] - sum_true[i];
    ident[i] = sum_sent[i] - (sum_true[i] - ef.residuals()[i]);
  }
  run.relative_error = Norm(diff) / Norm(sum_true);
  run.identity_error = Norm(ident) / Norm(sum_true);
  std::printf("%-9s ef=%d: |sent-true|/|true| %.3g, identity %.3g, max |r| %.3g "
              "(|g| %.3g), mean |r| mid %.3g late %.3g\n",
              name.c_str(), feedback, run.relative_error, run.identity_error, run.max_residual,
              run.gradient_norm, run.residual_mid, run.residual_late);
  return run;
}

TEST(ErrorFeedback, TransmittedSumTracksTrueSumAndResidualStaysBounded) {
  const int64_t n = 3000;  // not a multiple of the chunk
  const int steps = 400;
  for (const char* name : {"int8", "fp16", "bf16", "topk", "threshold"}) {
    const EfRun r = Simulate(name, true, n, steps);
    // sent = true - residual, up to fp32 rounding of the running sums.
    EXPECT_LT(r.identity_error, 1e-5) << name;
    // The residual does not grow with the steps: the late mean is not
    // above the mid one (by more than noise), and it stays a few gradients.
    EXPECT_LT(r.residual_late, 1.3 * r.residual_mid + 1e-6) << name;
    EXPECT_LT(r.max_residual, 15 * r.gradient_norm) << name;
    // So the relative error of the sum falls like 1/steps: small by now.
    EXPECT_LT(r.relative_error, name == std::string("topk") || name == std::string("threshold")
                                    ? 0.15
                                    : 1e-3)
        << name;
  }
}

TEST(ErrorFeedback, WithoutFeedbackTopkLosesTheSum) {
  const EfRun with = Simulate("topk", true, 3000, 400);
  const EfRun without = Simulate("topk", false, 3000, 400);
  EXPECT_GT(without.relative_error, 0.5) << "top-k 1% without feedback drops most of the sum";
  EXPECT_LT(with.relative_error, 0.2 * without.relative_error);
}

TEST(ErrorFeedback, KeysResidualsByFlatOffset) {
  CodecConfig c;
  c.chunk = 256;
  std::unique_ptr<Codec> codec = *CreateCodec(c);
  const int64_t n = 1000;
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = std::sin(0.37f * i);
  // One encode of [0, n) and two encodes of [0, 300) and [300, n) leave the
  // same residuals where the chunking agrees (first 256 values).
  ErrorFeedback whole(codec.get(), n), split(codec.get(), n);
  std::vector<uint8_t> block(codec->MaxEncodedBytes(n));
  whole.Encode(g.data(), 0, n, {}, block.data());
  split.Encode(g.data(), 0, 300, {}, block.data());
  split.Encode(g.data() + 300, 300, n - 300, {}, block.data());
  for (int64_t i = 0; i < 256; ++i) ASSERT_EQ(whole.residuals()[i], split.residuals()[i]);
  double s = 0;
  for (int64_t i = 300; i < n; ++i) s += split.residuals()[i] * split.residuals()[i];
  EXPECT_GT(s, 0) << "the second encode wrote its own offsets";
  EXPECT_EQ(split.SumOfSquares(0, n) > 0, true);
  split.Reset();
  EXPECT_EQ(split.SumOfSquares(0, n), 0.0);
}

TEST(ThresholdController, MovesTowardsTheTargetDensity) {
  EXPECT_EQ(ThresholdController::Next(0.f, 10, 10, 0.25f), 0.25f) << "starts from min_kept";
  EXPECT_EQ(ThresholdController::Next(1.f, 40, 10, 0.f), 2.f) << "too many kept: up, at most 2x";
  EXPECT_EQ(ThresholdController::Next(1.f, 1, 100, 0.f), 0.5f) << "too few: down, at most 2x";
  EXPECT_FLOAT_EQ(ThresholdController::Next(1.f, 20, 10, 0.f), std::sqrt(2.f));
  EXPECT_EQ(ThresholdController::Next(1.f, 0, 10, 0.f), 0.5f);
  // On stationary data the density settles near the target.
  std::unique_ptr<Codec> codec = *CreateCodec([] {
    CodecConfig c;
    c.codec = "threshold";
    c.density = 0.02;
    return c;
  }());
  const int64_t n = 5000;
  ThresholdController tc(1, {0.02});
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> g(n), ws(codec->WorkspaceFloats(n));
  std::vector<uint8_t> block(codec->MaxEncodedBytes(n));
  double density = 0;
  for (int t = 0; t < 60; ++t) {
    for (float& x : g) x = d(rng);
    EncodeParams p;
    p.threshold = tc.threshold(0);
    p.workspace = ws.data();
    codec->Encode(g.data(), n, p, block.data());
    tc.Update(0, block.data(), n);
    if (t >= 40) density += sparse::ReadHeader(block.data()).count / (20.0 * n);
  }
  std::printf("threshold settles at %.4g, density %.4g (target 0.02)\n", tc.threshold(0), density);
  EXPECT_NEAR(density, 0.02, 0.006);
}

}  // namespace
}  // namespace codec
}  // namespace tandem
