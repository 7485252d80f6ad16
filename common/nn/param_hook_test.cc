// The models' parameter hook (tensor/param_hook.h): each layer's range of
// the flat vector is gathered before and released after its forward (in
// forward order) and its backward (in reverse order), the ranges tile the
// vector, and a hook that poisons every released range with NaN changes
// nothing: the models read parameters only between Gather and Release.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "gtest/gtest.h"

namespace tandem {
namespace nn {
namespace {

using Range = std::pair<int64_t, int64_t>;

struct Event {
  bool gather;
  tensor::ParamPass pass;
  Range range;
};

// Records every call; with `params` set, NaN-poisons released ranges and
// restores them from `truth` on Gather.
class RecordingHook : public tensor::ParamHook {
 public:
  float* params = nullptr;
  std::vector<float> truth;
  std::vector<Event> events;

  absl::Status Gather(int64_t lo, int64_t hi, tensor::ParamPass pass) override {
    events.push_back({true, pass, {lo, hi}});
    if (params != nullptr) std::memcpy(params + lo, truth.data() + lo, (hi - lo) * sizeof(float));
    return absl::OkStatus();
  }
  void Release(int64_t lo, int64_t hi, tensor::ParamPass pass) override {
    events.push_back({false, pass, {lo, hi}});
    if (params != nullptr) {
      for (int64_t i = lo; i < hi; ++i) params[i] = std::nanf("");
    }
  }
};

struct Inputs {
  std::vector<float> features;
  std::vector<int32_t> tokens, labels;
  Batch batch;
};

Inputs MakeInputs(const Model& m, int batch) {
  Inputs in;
  std::mt19937 rng(3);
  const ModelSpec& s = m.spec();
  if (s.kind == ModelSpec::Kind::kMlp) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (int i = 0; i < batch * s.mlp.widths[0]; ++i) in.features.push_back(u(rng));
    for (int i = 0; i < batch; ++i) in.labels.push_back(rng() % s.mlp.widths.back());
    in.batch.features = in.features.data();
  } else {
    for (int i = 0; i < batch * s.gpt.context; ++i) {
      in.tokens.push_back(rng() % s.gpt.vocab);
      in.labels.push_back(rng() % s.gpt.vocab);
    }
    in.batch.tokens = in.tokens.data();
  }
  in.batch.size = batch;
  in.batch.labels = in.labels.data();
  return in;
}

class ParamHookTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParamHookTest, GathersEachLayerInForwardThenReverseOrder) {
  kernels::CpuBackend backend;
  ModelOptions mo;
  mo.max_batch = 4;
  auto m = CreateModel(GetParam(), &backend, mo);
  ASSERT_TRUE(m.ok()) << m.status();
  Model& model = **m;
  const std::vector<Range>& ranges = model.param_hook_ranges();
  ASSERT_GE(ranges.size(), 2u);
  // Forward order = descending offsets (the layout is in backward order);
  // the ranges tile [0, n).
  EXPECT_EQ(ranges.front().second, model.storage().size());
  EXPECT_EQ(ranges.back().first, 0);
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_EQ(ranges[i].second, ranges[i - 1].first) << i;
  }
  // A layer range is made of whole gradient groups.
  std::vector<int64_t> group_ends;
  for (const GradRange& g : GroupRanges(model.layout())) group_ends.push_back(g.hi);
  for (const Range& r : ranges) {
    EXPECT_NE(std::find(group_ends.begin(), group_ends.end(), r.second), group_ends.end());
  }

  RecordingHook hook;
  model.set_param_hook(&hook);
  Inputs in = MakeInputs(model, 2);
  ASSERT_TRUE(model.Forward(in.batch).ok());
  ASSERT_TRUE(model.Backward(0.f, nullptr).ok());
  const size_t L = ranges.size();
  ASSERT_EQ(hook.events.size(), 4 * L);
  for (size_t i = 0; i < L; ++i) {
    const Event& g = hook.events[2 * i];
    const Event& r = hook.events[2 * i + 1];
    EXPECT_TRUE(g.gather && !r.gather) << i;
    EXPECT_EQ(g.pass, tensor::ParamPass::kForward);
    EXPECT_EQ(r.pass, tensor::ParamPass::kForward);
    EXPECT_EQ(g.range, ranges[i]) << "forward step " << i;
    EXPECT_EQ(r.range, ranges[i]);
  }
  for (size_t i = 0; i < L; ++i) {
    const Event& g = hook.events[2 * L + 2 * i];
    const Event& r = hook.events[2 * L + 2 * i + 1];
    EXPECT_TRUE(g.gather && !r.gather) << i;
    EXPECT_EQ(g.pass, tensor::ParamPass::kBackward);
    EXPECT_EQ(g.range, ranges[L - 1 - i]) << "backward step " << i;
    EXPECT_EQ(r.range, ranges[L - 1 - i]);
  }
  // No hook: nothing is called.
  model.set_param_hook(nullptr);
  hook.events.clear();
  ASSERT_TRUE(model.Forward(in.batch).ok());
  ASSERT_TRUE(model.Backward(0.f, nullptr).ok());
  EXPECT_TRUE(hook.events.empty());
}

TEST_P(ParamHookTest, ModelsReadParametersOnlyWhileGathered) {
  kernels::CpuBackend backend;
  ModelOptions mo;
  mo.max_batch = 4;
  auto m = CreateModel(GetParam(), &backend, mo);
  ASSERT_TRUE(m.ok()) << m.status();
  Model& model = **m;
  const int64_t n = model.storage().size();
  Inputs in = MakeInputs(model, 3);
  ASSERT_TRUE(model.Forward(in.batch).ok());
  ASSERT_TRUE(model.Backward(0.f, nullptr).ok());
  const float loss = *model.loss();
  const std::vector<float> grads(model.storage().grads(), model.storage().grads() + n);

  RecordingHook hook;
  hook.params = model.storage().params();
  hook.truth.assign(hook.params, hook.params + n);
  for (int64_t i = 0; i < n; ++i) hook.params[i] = std::nanf("");
  model.set_param_hook(&hook);
  ASSERT_TRUE(model.Forward(in.batch).ok());
  ASSERT_TRUE(model.Backward(0.f, nullptr).ok());
  EXPECT_EQ(*model.loss(), loss);
  const float* g = model.storage().grads();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], grads[i]) << "gradient " << i;
}

INSTANTIATE_TEST_SUITE_P(Models, ParamHookTest,
                         ::testing::Values("mlp:6,8,7,3",
                                           "gpt:layers=2,heads=2,width=8,context=4,vocab=11"));

}  // namespace
}  // namespace nn
}  // namespace tandem
