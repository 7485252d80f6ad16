// Whole-model checks: gradients of the MLP and GPT (fp32, CPU backend)
// against finite differences of independent double-precision reference
// forwards; gradient-ready callbacks in backward order tiling the flat
// vector; deterministic initialisation; errors for bad input.
#include "common/nn/model.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/nn/reference_testutil.h"
#include "gtest/gtest.h"

namespace tandem {
namespace nn {
namespace {

using ref::Vec;

// Reads parameter `name` from a double copy of the flat vector.
const double* P(const tensor::ParameterLayout& layout, const Vec& flat,
                const std::string& name) {
  absl::StatusOr<int> i = layout.Find(name);
  EXPECT_TRUE(i.ok()) << name;
  return flat.data() + layout.param(i.ok() ? *i : 0).offset;
}

double RefMlpLoss(const ModelSpec& spec, const tensor::ParameterLayout& layout,
                  const Vec& flat, const std::vector<float>& x,
                  const std::vector<int32_t>& labels, int batch) {
  const std::vector<int>& w = spec.mlp.widths;
  Vec h(x.begin(), x.end());
  const int n = static_cast<int>(w.size()) - 1;
  for (int i = 0; i < n; ++i) {
    const std::string p = "fc" + std::to_string(i);
    h = ref::Linear(h, batch, w[i], w[i + 1], P(layout, flat, p + ".weight"),
                    P(layout, flat, p + ".bias"), i + 1 < n ? 1 : 0);
  }
  return ref::CrossEntropy(h, labels, batch, w.back());
}

double RefGptLoss(const ModelSpec& spec, const tensor::ParameterLayout& layout,
                  const Vec& flat, const std::vector<int32_t>& tokens,
                  const std::vector<int32_t>& labels, int batch) {
  const GptConfig& c = spec.gpt;
  const int rows = batch * c.context, W = c.width;
  auto p = [&](const std::string& n) { return P(layout, flat, n); };
  Vec x = ref::Embedding(tokens, batch, c.context, W, p("embed.token"),
                         p("embed.position"));
  for (int l = 0; l < c.layers; ++l) {
    const std::string h = "h" + std::to_string(l);
    Vec a = ref::Attention(
        ref::LayerNorm(x, rows, W, p(h + ".ln1.weight"), p(h + ".ln1.bias")),
        batch, c.context, W, c.heads, p(h + ".attn.qkv.weight"),
        p(h + ".attn.qkv.bias"), p(h + ".attn.proj.weight"),
        p(h + ".attn.proj.bias"));
    x = ref::Add(x, a);
    Vec m = ref::LayerNorm(x, rows, W, p(h + ".ln2.weight"), p(h + ".ln2.bias"));
    m = ref::Linear(m, rows, W, 4 * W, p(h + ".mlp.fc1.weight"),
                    p(h + ".mlp.fc1.bias"), 2);
    m = ref::Linear(m, rows, 4 * W, W, p(h + ".mlp.fc2.weight"),
                    p(h + ".mlp.fc2.bias"), 0);
    x = ref::Add(x, m);
  }
  x = ref::LayerNorm(x, rows, W, p("ln_f.weight"), p("ln_f.bias"));
  x = ref::Linear(x, rows, W, c.vocab, p("head.weight"), nullptr, 0);
  return ref::CrossEntropy(x, labels, rows, c.vocab);
}

// Compares the model's gradient with central differences of `ref_loss` for a
// sample of elements of every parameter.
void CheckModelGradients(Model* model,
                         const std::function<double(const Vec&)>& ref_loss) {
  const tensor::ParameterLayout& layout = model->layout();
  const float* params = model->storage().params();
  const float* grads = model->storage().grads();
  Vec flat(params, params + layout.total_size());
  std::mt19937_64 rng(11);
  const double h = 1e-5;
  for (const tensor::ParameterInfo& p : layout.params()) {
    std::uniform_int_distribution<int64_t> pick(0, p.size - 1);
    for (int k = 0; k < std::min<int64_t>(p.size, 12); ++k) {
      const int64_t i = p.offset + (p.size <= 12 ? k : pick(rng));
      const double saved = flat[i];
      flat[i] = saved + h;
      const double lp = ref_loss(flat);
      flat[i] = saved - h;
      const double lm = ref_loss(flat);
      flat[i] = saved;
      const double numeric = (lp - lm) / (2 * h);
      EXPECT_NEAR(grads[i], numeric, 1e-5 + 3e-3 * std::fabs(numeric))
          << p.name << "[" << i - p.offset << "]";
    }
  }
}

// Runs Backward and checks the ready callbacks: one per group, in group
// order, contiguous and covering the whole flat vector.
void BackwardAndCheckCallbacks(Model* model) {
  std::vector<GradRange> seen;
  ASSERT_TRUE(model->Backward(0.f, [&](const GradRange& r) { seen.push_back(r); }).ok());
  const tensor::ParameterLayout& layout = model->layout();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().lo, 0);
  EXPECT_EQ(seen.back().hi, layout.total_size());
  EXPECT_EQ(seen.back().end_param, layout.num_params());
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].group, static_cast<int>(i));
    EXPECT_LT(seen[i].lo, seen[i].hi);
    if (i > 0) {
      EXPECT_EQ(seen[i].lo, seen[i - 1].hi);
      EXPECT_EQ(seen[i].first_param, seen[i - 1].end_param);
    }
    for (int p = seen[i].first_param; p < seen[i].end_param; ++p) {
      EXPECT_EQ(layout.param(p).group, seen[i].group);
    }
  }
}

struct MlpCase { const char* spec; int batch; };

class MlpModelTest : public testing::TestWithParam<MlpCase> {};

TEST_P(MlpModelTest, GradientsMatchFiniteDifferences) {
  kernels::CpuBackend be;
  ModelOptions opts;
  opts.max_batch = GetParam().batch;
  opts.seed = 5;
  auto model = CreateModel(GetParam().spec, &be, opts);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelSpec& spec = (*model)->spec();
  const int batch = GetParam().batch, in = spec.mlp.widths.front();
  const int classes = spec.mlp.widths.back();
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(batch * in);
  for (float& v : x) v = u(rng);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = (i * 7 + 3) % classes;
  Batch b;
  b.size = batch;
  b.features = x.data();
  b.labels = labels.data();
  ASSERT_TRUE((*model)->Forward(b).ok());
  const tensor::ParameterLayout& layout = (*model)->layout();
  auto ref_loss = [&](const Vec& flat) {
    return RefMlpLoss(spec, layout, flat, x, labels, batch);
  };
  const float* params = (*model)->storage().params();
  EXPECT_NEAR(*(*model)->loss(), ref_loss(Vec(params, params + layout.total_size())), 1e-5);
  BackwardAndCheckCallbacks(model->get());
  CheckModelGradients(model->get(), ref_loss);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlpModelTest,
                         testing::Values(MlpCase{"mlp:3,2", 1},
                                         MlpCase{"mlp:7,5,3", 4},
                                         MlpCase{"mlp:13,9,11,4", 5}));

struct GptCase { const char* spec; int batch; };

class GptModelTest : public testing::TestWithParam<GptCase> {};

TEST_P(GptModelTest, GradientsMatchFiniteDifferences) {
  kernels::CpuBackend be;
  ModelOptions opts;
  opts.max_batch = GetParam().batch + 1;
  opts.seed = 9;
  auto model = CreateModel(GetParam().spec, &be, opts);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelSpec& spec = (*model)->spec();
  const GptConfig& c = spec.gpt;
  // Larger-than-default weights so every path carries a visible gradient.
  float* params = (*model)->storage().params();
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  for (const tensor::ParameterInfo& p : (*model)->layout().params()) {
    for (int64_t i = 0; i < p.size; ++i) params[p.offset + i] += u(rng);
  }
  const int batch = GetParam().batch;
  std::vector<int32_t> tokens(batch * c.context), labels(batch * c.context);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 5 + 1) % c.vocab);
    labels[i] = i % 4 == 3 ? -1 : static_cast<int32_t>((i * 3 + 2) % c.vocab);
  }
  Batch b;
  b.size = batch;
  b.tokens = tokens.data();
  b.labels = labels.data();
  ASSERT_TRUE((*model)->Forward(b).ok());
  const tensor::ParameterLayout& layout = (*model)->layout();
  auto ref_loss = [&](const Vec& flat) {
    return RefGptLoss(spec, layout, flat, tokens, labels, batch);
  };
  EXPECT_NEAR(*(*model)->loss(), ref_loss(Vec(params, params + layout.total_size())), 1e-4);
  BackwardAndCheckCallbacks(model->get());
  CheckModelGradients(model->get(), ref_loss);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GptModelTest,
    testing::Values(GptCase{"gpt:layers=1,heads=1,width=4,context=3,vocab=5", 1},
                    GptCase{"gpt:layers=2,heads=2,width=6,context=5,vocab=7", 2},
                    GptCase{"gpt:layers=2,heads=3,width=9,context=4,vocab=13", 3}));

TEST(ModelTest, SameSeedSameParametersDifferentSeedDifferent) {
  kernels::CpuBackend be;
  for (const char* spec : {"mlp:5,4,3", "gpt:layers=1,heads=2,width=4,context=3,vocab=5"}) {
    ModelOptions opts;
    opts.seed = 42;
    auto a = CreateModel(spec, &be, opts);
    auto b = CreateModel(spec, &be, opts);
    opts.seed = 43;
    auto c = CreateModel(spec, &be, opts);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    const int64_t n = (*a)->layout().total_size();
    EXPECT_EQ(0, std::memcmp((*a)->storage().params(), (*b)->storage().params(),
                             n * sizeof(float)));
    EXPECT_NE(0, std::memcmp((*a)->storage().params(), (*c)->storage().params(),
                             n * sizeof(float)));
    ASSERT_TRUE((*c)->Initialize(42).ok());
    EXPECT_EQ(0, std::memcmp((*a)->storage().params(), (*c)->storage().params(),
                             n * sizeof(float)));
  }
}

TEST(ModelTest, LayoutIsInBackwardOrder) {
  kernels::CpuBackend be;
  auto mlp = CreateModel("mlp:5,4,3", &be, ModelOptions());
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ((*mlp)->layout().param(0).name, "fc1.weight");
  EXPECT_EQ((*mlp)->layout().num_elements(), 4 * 5 + 4 + 3 * 4 + 3);
  auto gpt = CreateModel("gpt:layers=2,heads=2,width=4,context=3,vocab=5", &be,
                         ModelOptions());
  ASSERT_TRUE(gpt.ok());
  const tensor::ParameterLayout& l = (*gpt)->layout();
  EXPECT_EQ(l.param(0).name, "head.weight");
  EXPECT_EQ(l.param(l.num_params() - 1).name, "embed.position");
  EXPECT_LT(*l.Find("h1.mlp.fc2.weight"), *l.Find("h0.mlp.fc2.weight"));
}

TEST(ModelTest, BadInputReturnsStatus) {
  kernels::CpuBackend be;
  ModelOptions opts;
  opts.max_batch = 2;
  EXPECT_EQ(CreateModel("mlp:5", &be, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  opts.max_batch = 0;
  EXPECT_EQ(CreateModel("mlp:5,2", &be, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  opts.max_batch = 2;
  auto m = CreateModel("mlp:5,2", &be, opts);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)->Backward(0.f, nullptr).code(), absl::StatusCode::kFailedPrecondition);
  std::vector<float> x(15);
  std::vector<int32_t> y(3);
  Batch b;
  b.size = 3;  // > max_batch
  b.features = x.data();
  b.labels = y.data();
  EXPECT_EQ((*m)->Forward(b).code(), absl::StatusCode::kInvalidArgument);
  b.size = 1;
  b.features = nullptr;
  EXPECT_EQ((*m)->Forward(b).code(), absl::StatusCode::kInvalidArgument);
  auto g = CreateModel("gpt:layers=1,heads=1,width=4,context=3,vocab=5", &be, opts);
  ASSERT_TRUE(g.ok());
  b.features = x.data();
  b.tokens = nullptr;
  EXPECT_EQ((*g)->Forward(b).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace nn
}  // namespace tandem
