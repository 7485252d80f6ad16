#include "common/optim/adamw.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/numeric/cpu_dispatch.h"
#include "gtest/gtest.h"

namespace tandem {
namespace optim {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::unique_ptr<AdamW> MakeAdamW(ParamRange r, const AdamWOptions& o) {
  auto opt = AdamW::Create(r, o);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return std::move(opt).value();
}

TEST(AdamWTest, ShardedRangesMatchWholeVectorBitForBit) {
  const int64_t n = 2053;  // prime
  const std::vector<std::vector<int64_t>> splits = {
      {0, 1, n}, {0, 7, 8, 1024, 1031, n}, {0, 685, 1370, n}};
  AdamWOptions o;
  o.weight_decay = 0.1f;
  for (const auto& cuts : splits) {
    std::vector<float> whole = RandomVector(n, 3);
    std::vector<float> sharded = whole;
    auto ref = MakeAdamW({0, n}, o);
    std::vector<std::unique_ptr<AdamW>> shards;
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      shards.push_back(MakeAdamW({cuts[s], cuts[s + 1]}, o));
    }
    for (int step = 1; step <= 60; ++step) {
      const std::vector<float> grads = RandomVector(n, 1000 + step);
      StepContext ctx;
      ctx.step = step;
      ctx.lr = 1e-3f / step;
      ctx.grad_scale = (step % 4 == 0) ? 1.0f / 1024 : 1.0f;
      ASSERT_TRUE(ref->Step(whole.data(), grads.data(), n, ctx).ok());
      for (auto& sh : shards) {
        const int64_t lo = sh->range().lo;
        ASSERT_TRUE(sh->Step(sharded.data() + lo, grads.data() + lo,
                             sh->range().size(), ctx)
                        .ok());
      }
    }
    ASSERT_EQ(0, std::memcmp(whole.data(), sharded.data(), n * sizeof(float)));
    auto ref_state = ref->state();
    for (auto& sh : shards) {
      EXPECT_EQ(sh->state_bytes(), 2 * sh->range().size() *
                                       static_cast<int64_t>(sizeof(float)));
      auto st = sh->state();
      ASSERT_EQ(st.size(), 2u);
      for (size_t b = 0; b < st.size(); ++b) {
        EXPECT_EQ(st[b].name, ref_state[b].name);
        EXPECT_EQ(0, std::memcmp(st[b].data.data(),
                                 ref_state[b].data.data() + sh->range().lo,
                                 st[b].data.size() * sizeof(float)));
      }
    }
  }
}

// StepSlice over a tiling of the range (the allreduce strategy's per-bucket
// step) gives Step's bits, parameters and both moments, on a range that
// does not start at 0; a slice outside the range is an error.
TEST(AdamWTest, SlicesOfTheRangeMatchOneStepBitForBit) {
  const int64_t n = 2053;
  const std::vector<int64_t> cuts = {0, 7, 8, 1024, 1031, n};
  AdamWOptions o;
  o.weight_decay = 0.1f;
  auto whole = MakeAdamW({100, 100 + n}, o);
  auto sliced = MakeAdamW({100, 100 + n}, o);
  ASSERT_TRUE(sliced->supports_slices());
  std::vector<float> a = RandomVector(n, 5), b = a;
  for (int step = 1; step <= 20; ++step) {
    const std::vector<float> g = RandomVector(n, 500 + step);
    StepContext ctx;
    ctx.step = step;
    ctx.lr = 1e-2f / step;
    ctx.grad_scale = 0.5f;
    ASSERT_TRUE(whole->Step(a.data(), g.data(), n, ctx).ok());
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {  // last slice first, as buckets come
      const int64_t lo = cuts[cuts.size() - 2 - s], hi = cuts[cuts.size() - 1 - s];
      ASSERT_TRUE(sliced->StepSlice(b.data() + lo, g.data() + lo, lo, hi - lo, ctx).ok());
    }
  }
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float)));
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(0, std::memcmp(whole->state()[i].data.data(), sliced->state()[i].data.data(),
                             n * sizeof(float)));
  }
  StepContext ctx;
  const absl::Status bad = sliced->StepSlice(b.data(), a.data(), n - 3, 4, ctx);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("outside"), std::string::npos) << bad;
  EXPECT_FALSE(sliced->StepSlice(b.data(), a.data(), -1, 1, ctx).ok());
}

// Hand-computed: with a constant gradient, m_hat = g and v_hat = g^2 exactly,
// so every step moves p by lr * g / (|g| + eps) ~= lr; with decoupled weight
// decay, p_t = p_{t-1} * (1 - lr * wd) - lr.
// The AVX2 build of the kernel gives the baseline build's bits on ragged
// sizes (vector body plus remainder), parameters and both moments.
TEST(AdamWTest, WideAndBaselineVectorWidthsAgreeBitForBit) {
  AdamWOptions o;
  o.weight_decay = 0.01f;
  for (int64_t n : {1, 7, 8, 33, 1001}) {
    std::vector<float> params[3], grads = RandomVector(n, 12);
    std::vector<std::vector<float>> state[3];
    const std::vector<numeric::VectorWidth> widths = numeric::SupportedVectorWidths();
      for (size_t wide = 0; wide < widths.size(); ++wide) {
      numeric::ForceVectorWidth(widths[wide]);
      params[wide] = RandomVector(n, 11);
      auto opt = MakeAdamW({0, n}, o);
      StepContext ctx;
      ctx.lr = 1e-2f;
      ctx.grad_scale = 0.5f;
      for (int step = 1; step <= 4; ++step) {
        ctx.step = step;
        ASSERT_TRUE(opt->Step(params[wide].data(), grads.data(), n, ctx).ok());
      }
      for (const StateBuffer& b : opt->state()) state[wide].emplace_back(b.data.begin(), b.data.end());
    }
    numeric::ForceBaselineVectorWidth(false);
    for (size_t w = 1; w < widths.size(); ++w) {
      EXPECT_EQ(std::memcmp(params[0].data(), params[w].data(), n * sizeof(float)), 0)
          << n << " at " << numeric::VectorWidthName(widths[w]);
      EXPECT_EQ(state[0], state[w]) << n << " at " << numeric::VectorWidthName(widths[w]);
    }
  }
}

TEST(AdamWTest, MatchesHandComputedValuesForConstantGradient) {
  const float g = 0.5f;
  StepContext ctx;
  ctx.lr = 0.1f;
  {
    AdamWOptions o;
    o.weight_decay = 0.0f;
    auto opt = MakeAdamW({0, 1}, o);
    float p = 1.0f;
    for (int s = 1; s <= 3; ++s) {
      ctx.step = s;
      ASSERT_TRUE(opt->Step(&p, &g, 1, ctx).ok());
      EXPECT_NEAR(p, 1.0f - 0.1f * s, 1e-6) << "step " << s;
    }
  }
  {
    AdamWOptions o;
    o.weight_decay = 0.1f;
    auto opt = MakeAdamW({0, 1}, o);
    float p = 1.0f;
    const float expect[] = {0.89f, 0.7811f, 0.673289f};
    for (int s = 1; s <= 3; ++s) {
      ctx.step = s;
      ASSERT_TRUE(opt->Step(&p, &g, 1, ctx).ok());
      EXPECT_NEAR(p, expect[s - 1], 1e-6) << "step " << s;
    }
  }
}

// Hand-computed second step with a sign change: g1 = 0.5, g2 = -0.25.
// m2 = 0.02, v2 = 0.00031225, bc1 = 0.19, bc2 = 0.001999:
// p2 = 0.9 - 0.1 * (0.02 / 0.19) / sqrt(0.00031225 / 0.001999)
//    = 0.9 - 0.0266333 = 0.8733667
TEST(AdamWTest, MatchesHandComputedValuesWithSignChange) {
  AdamWOptions o;
  o.weight_decay = 0.0f;
  auto opt = MakeAdamW({0, 1}, o);
  float p = 1.0f;
  StepContext ctx;
  ctx.lr = 0.1f;
  const float g1 = 0.5f, g2 = -0.25f;
  ctx.step = 1;
  ASSERT_TRUE(opt->Step(&p, &g1, 1, ctx).ok());
  EXPECT_NEAR(p, 0.9f, 1e-6);
  ctx.step = 2;
  ASSERT_TRUE(opt->Step(&p, &g2, 1, ctx).ok());
  EXPECT_NEAR(p, 0.8733667f, 2e-6);
  auto st = opt->state();
  EXPECT_NEAR(st[0].data[0], 0.02f, 1e-7);
  // 0.999f is not exactly 0.999, so v differs from the decimal value by ~1e-5.
  EXPECT_NEAR(st[1].data[0], 0.00031225f, 1e-8);
}

// Many steps against a straightforward double-precision implementation.
TEST(AdamWTest, TracksDoublePrecisionReference) {
  const int64_t n = 333;
  AdamWOptions o;
  o.weight_decay = 0.05f;
  auto opt = MakeAdamW({0, n}, o);
  std::vector<float> p = RandomVector(n, 9);
  std::vector<double> pd(p.begin(), p.end()), m(n, 0), v(n, 0);
  for (int t = 1; t <= 100; ++t) {
    const std::vector<float> g = RandomVector(n, 500 + t);
    StepContext ctx;
    ctx.step = t;
    ctx.lr = 1e-2f;
    ASSERT_TRUE(opt->Step(p.data(), g.data(), n, ctx).ok());
    const double lr = ctx.lr, b1 = o.beta1, b2 = o.beta2;
    for (int64_t i = 0; i < n; ++i) {
      pd[i] *= 1 - lr * o.weight_decay;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * double(g[i]) * g[i];
      const double mh = m[i] / (1 - std::pow(b1, t));
      const double vh = v[i] / (1 - std::pow(b2, t));
      pd[i] -= lr * mh / (std::sqrt(vh) + o.eps);
    }
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], pd[i], 2e-5) << i;
}

TEST(AdamWTest, ResetStateZeroesMoments) {
  auto opt = MakeAdamW({0, 4}, AdamWOptions());
  std::vector<float> p(4, 1.0f), g(4, 1.0f);
  StepContext ctx;
  ctx.lr = 0.1f;
  ASSERT_TRUE(opt->Step(p.data(), g.data(), 4, ctx).ok());
  EXPECT_NE(opt->state()[0].data[0], 0.0f);
  opt->ResetState();
  for (const StateBuffer& b : opt->state())
    for (float x : b.data) EXPECT_EQ(x, 0.0f);
}

TEST(AdamWTest, RejectsBadOptionsAndArguments) {
  AdamWOptions o;
  o.beta2 = 1.0f;
  auto st = AdamW::Create({0, 4}, o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("beta2"), absl::string_view::npos);
  o = AdamWOptions();
  o.eps = 0;
  EXPECT_FALSE(AdamW::Create({0, 4}, o).ok());
  o = AdamWOptions();
  o.weight_decay = -0.1f;
  EXPECT_FALSE(AdamW::Create({0, 4}, o).ok());

  auto opt = MakeAdamW({0, 4}, AdamWOptions());
  std::vector<float> p(4, 1.0f), g(4, 1.0f);
  StepContext ctx;
  ctx.lr = 0.1f;
  ctx.step = 0;
  EXPECT_FALSE(opt->Step(p.data(), g.data(), 4, ctx).ok());
  ctx.step = 1;
  EXPECT_FALSE(opt->Step(p.data(), g.data(), 5, ctx).ok());
  for (float x : p) EXPECT_EQ(x, 1.0f);
  for (float x : opt->state()[0].data) EXPECT_EQ(x, 0.0f);
}

TEST(AdamWTest, ScalarsMatchDocumentedFormulas) {
  AdamWOptions o;
  o.weight_decay = 0.01f;
  const AdamWScalars s = ComputeAdamWScalars(o, 3, 0.5f);
  EXPECT_FLOAT_EQ(s.decay, 1.0f - 0.5f * 0.01f);
  EXPECT_FLOAT_EQ(s.step_size, 0.5f / (1.0f - 0.729f));
  EXPECT_FLOAT_EQ(s.inv_sqrt_bc2,
                  static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(0.999f, 3))));
}

}  // namespace
}  // namespace optim
}  // namespace tandem
