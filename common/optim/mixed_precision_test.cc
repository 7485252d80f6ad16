// How the pieces compose in one fp16 training step on a sharded model:
// fp16 gradients -> fp32, OR-reduced inf/NaN check, loss scaler decision,
// sharded global-norm clipping, and one fused Step() per shard with
// grad_scale = (1 / loss_scale) * clip_factor; fp32 master weights are then
// cast back to fp16.
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "common/numeric/precision.h"
#include "common/optim/adamw.h"
#include "common/optim/clip.h"
#include "common/optim/loss_scaler.h"
#include "gtest/gtest.h"

namespace tandem {
namespace optim {
namespace {

constexpr int64_t kN = 1001;
const std::vector<int64_t> kCuts = {0, 250, 251, 777, kN};  // 4 "ranks"

struct Shards {
  std::vector<std::unique_ptr<AdamW>> opts;
  Shards() {
    for (size_t s = 0; s + 1 < kCuts.size(); ++s) {
      opts.push_back(
          std::move(AdamW::Create({kCuts[s], kCuts[s + 1]}, AdamWOptions()))
              .value());
    }
  }
};

// One step; returns whether it was applied.
bool TrainStep(const std::vector<numeric::fp16_t>& half_grads, DynamicLossScaler* scaler,
               Shards* shards, int64_t* applied, std::vector<float>* master,
               std::vector<float>* grads) {
  EXPECT_TRUE(numeric::HalfToFloat(half_grads, absl::MakeSpan(*grads)).ok());
  bool bad = false;  // OR over ranks (an allreduce in the real system)
  double sum_sq = 0;  // sum over ranks (an allreduce)
  for (size_t s = 0; s + 1 < kCuts.size(); ++s) {
    auto mine = absl::MakeConstSpan(*grads).subspan(kCuts[s], kCuts[s + 1] - kCuts[s]);
    bad = bad || numeric::HasNonFinite(mine);
    if (!bad) sum_sq += PartialSumOfSquares(mine);
  }
  auto decision = scaler->Update(bad);
  EXPECT_TRUE(decision.ok());
  if (*decision == LossScaleDecision::kSkip) return false;
  const float inv = scaler->inverse_scale_of_last_step();
  // The scaled gradients' norm, unscaled, then clipped to 1.
  auto clip = ComputeClip(sum_sq * double(inv) * double(inv), 1.0);
  EXPECT_TRUE(clip.ok());
  StepContext ctx;
  ctx.step = ++*applied;
  ctx.lr = 1e-2f;
  ctx.grad_scale = inv * clip->scale;
  for (auto& opt : shards->opts) {
    const int64_t lo = opt->range().lo;
    EXPECT_TRUE(opt->Step(master->data() + lo, grads->data() + lo,
                          opt->range().size(), ctx)
                    .ok());
  }
  return true;
}

TEST(MixedPrecisionTest, OverflowSkipsStepThenTrainingResumes) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> master(kN), grads(kN);
  for (float& x : master) x = dist(rng);
  std::vector<numeric::fp16_t> half_params(kN), half_grads(kN);
  ASSERT_TRUE(numeric::FloatToHalf(master, absl::MakeSpan(half_params)).ok());

  LossScalerOptions lo;
  lo.initial_scale = 1024;
  lo.growth_interval = 2;
  auto scaler = std::move(DynamicLossScaler::Create(lo)).value();
  Shards shards;
  int64_t applied = 0;

  auto make_grads = [&](float overflow_at) {
    std::vector<float> g(kN);
    for (float& x : g) x = dist(rng) * 0.01f * scaler.scale();
    if (overflow_at >= 0) g[static_cast<size_t>(overflow_at)] = 1e6f;  // > 65504
    EXPECT_TRUE(numeric::FloatToHalf(g, absl::MakeSpan(half_grads)).ok());
  };

  make_grads(-1);
  ASSERT_TRUE(TrainStep(half_grads, &scaler, &shards, &applied, &master, &grads));
  const std::vector<float> after_first = master;
  std::vector<std::vector<float>> state_before;
  for (auto& opt : shards.opts)
    for (const StateBuffer& b : opt->state())
      state_before.emplace_back(b.data.begin(), b.data.end());

  // Rank 3's slice overflows in fp16: every rank skips, nothing changes.
  make_grads(900);
  EXPECT_FALSE(TrainStep(half_grads, &scaler, &shards, &applied, &master, &grads));
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.scale(), 512.0f);
  EXPECT_EQ(0, std::memcmp(master.data(), after_first.data(), kN * 4));
  size_t k = 0;
  for (auto& opt : shards.opts)
    for (const StateBuffer& b : opt->state())
      EXPECT_EQ(0, std::memcmp(b.data.data(), state_before[k++].data(),
                               b.data.size() * 4));
  EXPECT_EQ(applied, 1);

  make_grads(-1);
  ASSERT_TRUE(TrainStep(half_grads, &scaler, &shards, &applied, &master, &grads));
  EXPECT_EQ(applied, 2);  // AdamW's bias correction saw step 2, not 3
  EXPECT_NE(0, std::memcmp(master.data(), after_first.data(), kN * 4));
  make_grads(-1);
  ASSERT_TRUE(TrainStep(half_grads, &scaler, &shards, &applied, &master, &grads));
  EXPECT_EQ(scaler.scale(), 1024.0f);  // grew back after 2 good steps

  // The fp16 compute copy follows the fp32 master weights.
  ASSERT_TRUE(numeric::FloatToHalf(master, absl::MakeSpan(half_params)).ok());
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_NEAR(numeric::HalfToFloat(half_params[i]), master[i],
                std::abs(master[i]) * 1e-3f + 1e-7f);
  }
}

// Folding 1/scale and the clip factor into grad_scale equals unscaling and
// clipping the gradients in separate passes first.
TEST(MixedPrecisionTest, FusedGradScaleEqualsSeparatePasses) {
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> p(kN), g(kN);
  for (float& x : p) x = dist(rng);
  for (float& x : g) x = dist(rng) * 256.0f;  // gradients at loss scale 256
  std::vector<float> fused = p, separate = p;
  auto a = std::move(AdamW::Create({0, kN}, AdamWOptions())).value();
  auto b = std::move(AdamW::Create({0, kN}, AdamWOptions())).value();
  auto clip = ComputeClip(PartialSumOfSquares(g) / (256.0 * 256.0), 0.5);
  ASSERT_TRUE(clip.ok());
  ASSERT_TRUE(clip->clipped);
  StepContext ctx;
  ctx.lr = 1e-3f;
  ctx.grad_scale = (1.0f / 256.0f) * clip->scale;
  ASSERT_TRUE(a->Step(fused.data(), g.data(), kN, ctx).ok());
  std::vector<float> g2 = g;
  ScaleInPlace(absl::MakeSpan(g2), (1.0f / 256.0f) * clip->scale);
  ctx.grad_scale = 1.0f;
  ASSERT_TRUE(b->Step(separate.data(), g2.data(), kN, ctx).ok());
  EXPECT_EQ(0, std::memcmp(fused.data(), separate.data(), kN * 4));
}

}  // namespace
}  // namespace optim
}  // namespace tandem
