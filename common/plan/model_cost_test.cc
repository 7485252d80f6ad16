#include "common/plan/model_cost.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "absl/strings/match.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

// The cost model's counts must be the real model's: build the model and
// compare its layout group by group.
void ExpectMatchesRealModel(const std::string& spec_text) {
  SCOPED_TRACE(spec_text);
  kernels::CpuBackend be;
  nn::ModelOptions opts;
  opts.max_batch = 2;
  auto model = nn::CreateModel(spec_text, &be, opts);
  ASSERT_TRUE(model.ok()) << model.status();
  auto cost = ModelCostOf((*model)->spec());
  ASSERT_TRUE(cost.ok()) << cost.status();
  const tensor::ParameterLayout& layout = (*model)->layout();
  EXPECT_EQ(cost->parameters, layout.num_elements());
  EXPECT_EQ(cost->flat_size, layout.total_size());
  // Backward order: the order the model reports ready ranges in.
  std::vector<int64_t> real;
  for (const nn::GradRange& r : nn::GroupRanges(layout)) real.push_back(r.hi - r.lo);
  EXPECT_EQ(cost->groups_backward, real);
  EXPECT_EQ(cost->rows_per_sample, (*model)->rows_per_sample());
  ASSERT_EQ(cost->backward_flops.size(), cost->groups_backward.size());
  EXPECT_DOUBLE_EQ(std::accumulate(cost->backward_flops.begin(), cost->backward_flops.end(), 0.0),
                   cost->train_flops - cost->forward_flops);
  // The same parameter shapes (what PowerSGD factors), group by group.
  ASSERT_EQ(cost->shapes_backward.size(), real.size());
  std::vector<std::vector<int64_t>> real_shapes, cost_shapes;
  for (const auto& p : layout.params()) real_shapes.push_back(p.shape);
  for (const auto& group : cost->shapes_backward) {
    cost_shapes.insert(cost_shapes.end(), group.begin(), group.end());
  }
  std::sort(real_shapes.begin(), real_shapes.end());
  std::sort(cost_shapes.begin(), cost_shapes.end());
  EXPECT_EQ(cost_shapes, real_shapes);
  // The groups marked as embeddings are those of the layout's embed.* tables.
  std::vector<bool> real_embeddings(real.size(), false);
  for (const auto& p : layout.params()) {
    if (absl::StartsWith(p.name, "embed.")) real_embeddings[p.group] = true;
  }
  EXPECT_EQ(cost->embeddings_backward, real_embeddings);
}

TEST(ModelCostTest, CountsMatchTheRealMlp) {
  ExpectMatchesRealModel("mlp:784,1024,1024,10");
  ExpectMatchesRealModel("mlp:3,5");
}

TEST(ModelCostTest, CountsMatchTheRealGpt) {
  ExpectMatchesRealModel("gpt:layers=2,heads=4,width=64,context=32,vocab=256");
  ExpectMatchesRealModel("gpt:layers=1,heads=1,width=8,context=3,vocab=5");
}

TEST(ModelCostTest, MlpFlopsAreTwoPerMultiplyAddTimesThree) {
  auto spec = nn::ParseModelSpec("mlp:784,1024,1024,10");
  ASSERT_TRUE(spec.ok());
  auto c = ModelCostOf(*spec);
  ASSERT_TRUE(c.ok());
  const double macs = 784.0 * 1024 + 1024.0 * 1024 + 1024.0 * 10;
  EXPECT_DOUBLE_EQ(c->forward_flops, 2 * macs);
  // Backward: weight and input gradients, but no input gradient for the
  // first layer: 9.56 MFLOP, mlp_breakdown_bench's count.
  EXPECT_DOUBLE_EQ(c->train_flops, 6 * macs - 2 * 784.0 * 1024);
  EXPECT_DOUBLE_EQ(c->backward_flops.back(), 2 * 784.0 * 1024);
}

TEST(ModelCostTest, GptFlopsFollowTheSixNTRule) {
  // 6 * (GEMM parameters) per token plus attention, per sequence of T tokens.
  auto spec = nn::ParseModelSpec("gpt:layers=2,heads=4,width=64,context=32,vocab=256");
  ASSERT_TRUE(spec.ok());
  auto c = ModelCostOf(*spec);
  ASSERT_TRUE(c.ok());
  const double w = 64, t = 32, v = 256, layers = 2;
  const double gemm_params = layers * 12 * w * w + w * v;
  const double attention = layers * 2 * t * t * w;  // causal QK^T + AV per sequence
  EXPECT_DOUBLE_EQ(c->forward_flops, 2 * gemm_params * t + attention);
}

TEST(ModelCostTest, RejectsNonPositiveSizes) {
  nn::ModelSpec bad;
  bad.kind = nn::ModelSpec::Kind::kMlp;
  bad.mlp.widths = {784, 0, 10};
  auto c = ModelCostOf(bad);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("width 0"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace plan
}  // namespace tandem
