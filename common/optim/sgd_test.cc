#include "common/optim/sgd.h"

#include <cstring>
#include <limits>
#include <memory>
#include <random>
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

std::unique_ptr<Sgd> MakeSgd(ParamRange r, const SgdOptions& o) {
  auto opt = Sgd::Create(r, o);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return std::move(opt).value();
}

struct Config {
  const char* label;
  SgdOptions options;
};

std::vector<Config> Configs() {
  std::vector<Config> c;
  c.push_back({"plain", SgdOptions()});
  SgdOptions wd;
  wd.weight_decay = 0.05f;
  c.push_back({"plain+wd", wd});
  SgdOptions mom;
  mom.momentum = 0.9f;
  c.push_back({"momentum", mom});
  SgdOptions nes;
  nes.momentum = 0.9f;
  nes.nesterov = true;
  nes.weight_decay = 1e-3f;
  c.push_back({"nesterov+wd", nes});
  return c;
}

// StepSlice over a tiling of the range (the allreduce strategy's per-bucket
// step) gives Step's bits, parameters and momentum, for every variant.
TEST(SgdTest, SlicesOfTheRangeMatchOneStepBitForBit) {
  const int64_t n = 1237;
  const std::vector<int64_t> cuts = {0, 5, 6, 640, 649, n};
  for (const Config& cfg : Configs()) {
    SCOPED_TRACE(cfg.label);
    auto whole = MakeSgd({50, 50 + n}, cfg.options);
    auto sliced = MakeSgd({50, 50 + n}, cfg.options);
    ASSERT_TRUE(sliced->supports_slices());
    std::vector<float> a = RandomVector(n, 7), b = a;
    for (int step = 1; step <= 10; ++step) {
      const std::vector<float> g = RandomVector(n, 300 + step);
      StepContext ctx;
      ctx.step = step;
      ctx.lr = 0.05f;
      ctx.grad_scale = 0.25f;
      ASSERT_TRUE(whole->Step(a.data(), g.data(), n, ctx).ok());
      for (size_t s = 0; s + 1 < cuts.size(); ++s) {
        const int64_t lo = cuts[s], hi = cuts[s + 1];
        ASSERT_TRUE(sliced->StepSlice(b.data() + lo, g.data() + lo, lo, hi - lo, ctx).ok());
      }
    }
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float)));
    ASSERT_EQ(whole->state().size(), sliced->state().size());
    for (size_t i = 0; i < whole->state().size(); ++i) {
      ASSERT_EQ(0, std::memcmp(whole->state()[i].data.data(), sliced->state()[i].data.data(),
                               n * sizeof(float)));
    }
    EXPECT_EQ(sliced->StepSlice(b.data(), a.data(), 1, n, StepContext()).code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// Stepping shards [lo, hi) with their own optimizers must reproduce the
// whole-vector optimizer bit for bit, parameters and state.
TEST(SgdTest, ShardedRangesMatchWholeVectorBitForBit) {
  const int64_t n = 1237;  // odd, not a multiple of any vector width
  const std::vector<std::vector<int64_t>> splits = {
      {0, n}, {0, 1, n}, {0, 5, 517, 1000, 1237}, {0, 3, 4, 11, 600, 1236, n}};
  for (const Config& cfg : Configs()) {
    for (const auto& cuts : splits) {
      SCOPED_TRACE(cfg.label);
      std::vector<float> whole = RandomVector(n, 1);
      std::vector<float> sharded = whole;
      auto ref = MakeSgd({0, n}, cfg.options);
      std::vector<std::unique_ptr<Sgd>> shards;
      for (size_t s = 0; s + 1 < cuts.size(); ++s) {
        shards.push_back(MakeSgd({cuts[s], cuts[s + 1]}, cfg.options));
      }
      for (int step = 1; step <= 40; ++step) {
        const std::vector<float> grads = RandomVector(n, 100 + step);
        StepContext ctx;
        ctx.step = step;
        ctx.lr = 0.01f * (1.0f + 0.1f * step);
        ctx.grad_scale = (step % 3 == 0) ? 0.25f : 1.0f;
        ASSERT_TRUE(ref->Step(whole.data(), grads.data(), n, ctx).ok());
        for (auto& sh : shards) {
          const int64_t lo = sh->range().lo;
          ASSERT_TRUE(sh->Step(sharded.data() + lo, grads.data() + lo,
                               sh->range().size(), ctx)
                          .ok());
        }
      }
      ASSERT_EQ(0, std::memcmp(whole.data(), sharded.data(), n * sizeof(float)));
      // State too: each shard's buffer equals the slice of the whole one.
      auto ref_state = ref->state();
      for (auto& sh : shards) {
        auto st = sh->state();
        ASSERT_EQ(st.size(), ref_state.size());
        for (size_t b = 0; b < st.size(); ++b) {
          ASSERT_EQ(st[b].data.size(), sh->range().size());
          EXPECT_EQ(0, std::memcmp(st[b].data.data(),
                                   ref_state[b].data.data() + sh->range().lo,
                                   st[b].data.size() * sizeof(float)));
        }
      }
    }
  }
}

// The AVX2 build of the loops (cpu_dispatch.h) gives the same bits as the
// baseline build on ragged sizes (a vector body plus a remainder).
TEST(SgdTest, WideAndBaselineVectorWidthsAgreeBitForBit) {
  for (const Config& c : Configs()) {
    for (int64_t n : {1, 7, 8, 33, 1001}) {
      std::vector<float> params[3], grads = RandomVector(n, 5);
      std::vector<std::vector<float>> state[3];
      const std::vector<numeric::VectorWidth> widths = numeric::SupportedVectorWidths();
      for (size_t wide = 0; wide < widths.size(); ++wide) {
        numeric::ForceVectorWidth(widths[wide]);
        params[wide] = RandomVector(n, 4);
        auto opt = MakeSgd({0, n}, c.options);
        StepContext ctx;
        ctx.lr = 0.1f;
        ctx.grad_scale = 0.5f;
        for (int step = 1; step <= 3; ++step) {
          ctx.step = step;
          ASSERT_TRUE(opt->Step(params[wide].data(), grads.data(), n, ctx).ok());
        }
        for (const StateBuffer& b : opt->state()) state[wide].emplace_back(b.data.begin(), b.data.end());
      }
      numeric::ForceBaselineVectorWidth(false);
      for (size_t w = 1; w < widths.size(); ++w) {
        EXPECT_EQ(std::memcmp(params[0].data(), params[w].data(), n * sizeof(float)), 0)
            << c.label << " n=" << n << " at " << numeric::VectorWidthName(widths[w]);
        EXPECT_EQ(state[0], state[w]) << c.label << " n=" << n;
      }
    }
  }
}

TEST(SgdTest, ShardAllocatesStateOnlyForItsRange) {
  SgdOptions o;
  o.momentum = 0.9f;
  auto sh = MakeSgd({1000, 1300}, o);
  EXPECT_EQ(sh->state_bytes(), 300 * static_cast<int64_t>(sizeof(float)));
  auto plain = MakeSgd({0, 1000}, SgdOptions());
  EXPECT_EQ(plain->state_bytes(), 0);
  EXPECT_TRUE(plain->state().empty());
}

// Hand-computed: p0 = 1, g = 0.5 every step, lr = 0.1.
TEST(SgdTest, MatchesHandComputedValues) {
  const float g = 0.5f;
  StepContext ctx;
  ctx.lr = 0.1f;
  {
    SgdOptions o;
    o.momentum = 0.9f;
    auto opt = MakeSgd({0, 1}, o);
    float p = 1.0f;
    const float expect[] = {0.95f, 0.855f, 0.7195f};  // buf 0.5, 0.95, 1.355
    for (int s = 1; s <= 3; ++s) {
      ctx.step = s;
      ASSERT_TRUE(opt->Step(&p, &g, 1, ctx).ok());
      EXPECT_NEAR(p, expect[s - 1], 1e-6) << "momentum step " << s;
    }
  }
  {
    SgdOptions o;
    o.momentum = 0.9f;
    o.nesterov = true;
    auto opt = MakeSgd({0, 1}, o);
    float p = 1.0f;
    // d1 = 0.5 + 0.9*0.5 = 0.95; d2 = 0.5 + 0.9*0.95 = 1.355
    const float expect[] = {0.905f, 0.7695f};
    for (int s = 1; s <= 2; ++s) {
      ctx.step = s;
      ASSERT_TRUE(opt->Step(&p, &g, 1, ctx).ok());
      EXPECT_NEAR(p, expect[s - 1], 1e-6) << "nesterov step " << s;
    }
  }
  {
    SgdOptions o;
    o.weight_decay = 0.1f;
    auto opt = MakeSgd({0, 1}, o);
    float p = 1.0f;
    // g1 = 0.5 + 0.1*1 = 0.6; g2 = 0.5 + 0.1*0.94 = 0.594
    const float expect[] = {0.94f, 0.8806f};
    for (int s = 1; s <= 2; ++s) {
      ctx.step = s;
      ASSERT_TRUE(opt->Step(&p, &g, 1, ctx).ok());
      EXPECT_NEAR(p, expect[s - 1], 1e-6) << "weight decay step " << s;
    }
  }
}

TEST(SgdTest, GradScaleIsAppliedToGradient) {
  auto a = MakeSgd({0, 1}, SgdOptions());
  float p = 1.0f;
  const float g = 8.0f;
  StepContext ctx;
  ctx.lr = 0.1f;
  ctx.grad_scale = 0.125f;  // 8 * 0.125 = 1
  ASSERT_TRUE(a->Step(&p, &g, 1, ctx).ok());
  EXPECT_FLOAT_EQ(p, 0.9f);
}

TEST(SgdTest, RejectsBadOptionsAndArguments) {
  SgdOptions o;
  o.momentum = 1.0f;
  EXPECT_EQ(Sgd::Create({0, 4}, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = SgdOptions();
  o.nesterov = true;
  auto st = Sgd::Create({0, 4}, o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("nesterov"), absl::string_view::npos);
  o = SgdOptions();
  o.weight_decay = -1;
  EXPECT_FALSE(Sgd::Create({0, 4}, o).ok());
  EXPECT_FALSE(Sgd::Create({5, 4}, SgdOptions()).ok());
  EXPECT_FALSE(Sgd::Create({-1, 4}, SgdOptions()).ok());

  auto opt = MakeSgd({10, 14}, SgdOptions());
  std::vector<float> p(4, 1.0f), g(4, 1.0f);
  StepContext ctx;
  ctx.lr = 0.1f;
  auto wrong_n = opt->Step(p.data(), g.data(), 3, ctx);
  EXPECT_EQ(wrong_n.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_n.message().find("[10, 14)"), absl::string_view::npos);
  EXPECT_FALSE(opt->Step(nullptr, g.data(), 4, ctx).ok());
  ctx.step = 0;
  EXPECT_FALSE(opt->Step(p.data(), g.data(), 4, ctx).ok());
  ctx.step = 1;
  ctx.lr = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(opt->Step(p.data(), g.data(), 4, ctx).ok());
  for (float x : p) EXPECT_EQ(x, 1.0f);  // untouched on error
}

TEST(SgdTest, EmptyRangeIsANoOp) {
  auto opt = MakeSgd({7, 7}, SgdOptions());
  StepContext ctx;
  ctx.lr = 1.0f;
  EXPECT_TRUE(opt->Step(nullptr, nullptr, 0, ctx).ok());
}

}  // namespace
}  // namespace optim
}  // namespace tandem
