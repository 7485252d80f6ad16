#include "common/torchscript/torchscript_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/kernels/cpu_backend.h"
#include "common/optim/sgd.h"
#include "gtest/gtest.h"

namespace tandem {
namespace torchscript {
namespace {

constexpr char kCnn[] = "common/torchscript/cnn.pt";

std::string TestModule(const std::string& name) {
  return "common/torchscript/testdata/" + name + ".pt";
}

absl::StatusOr<std::unique_ptr<TorchScriptModel>> Load(const std::string& path,
                                                       kernels::Backend* be, int classes = 10) {
  nn::ModelSpec spec;
  spec.kind = nn::ModelSpec::Kind::kTorchScript;
  spec.torchscript.path = path;
  nn::ModelOptions o;
  o.sample.shape = {784};
  o.sample.num_classes = classes;
  return TorchScriptModel::Create(spec, be, o);
}

struct Samples {
  std::vector<float> x;
  std::vector<int32_t> y;
  explicit Samples(int n) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    for (int i = 0; i < n * 784; ++i) x.push_back(u(rng));
    for (int i = 0; i < n; ++i) y.push_back(static_cast<int32_t>(rng() % 10));
  }
  nn::Batch batch() const {
    nn::Batch b;
    b.size = static_cast<int>(y.size());
    b.features = x.data();
    b.labels = y.data();
    return b;
  }
};

double AbsSum(const float* v, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(v[i]);
  return s;
}

TEST(TorchScriptModelTest, GradientsLandInTheFlatBufferInReadinessOrder) {
  kernels::CpuBackend be;
  auto m = Load(kCnn, &be);
  ASSERT_TRUE(m.ok()) << m.status();
  TorchScriptModel& model = **m;
  // conv1, bn1, conv2, bn2, fc1, fc2: weight and bias each.
  ASSERT_EQ(model.layout().num_params(), 12);
  const std::vector<std::string> names = model.ParameterNames();
  // Backward finishes the last layer first: it leads the flat vector.
  EXPECT_TRUE(absl::StartsWith(names.front(), "fc2.")) << names.front();
  EXPECT_TRUE(absl::StartsWith(names.back(), "conv1.")) << names.back();
  EXPECT_EQ(model.rows_per_sample(), 1);

  const Samples s(8);
  ASSERT_TRUE(model.Forward(s.batch()).ok());
  EXPECT_NEAR(*model.loss(), std::log(10.0), 0.7);
  std::vector<nn::GradRange> seen;
  ASSERT_TRUE(model.Backward(0.f, [&](const nn::GradRange& r) { seen.push_back(r); }).ok());
  ASSERT_EQ(seen.size(), 12u);
  const std::vector<nn::GradRange> ranges = nn::GroupRanges(model.layout());
  std::vector<bool> hit(ranges.size(), false);
  for (const nn::GradRange& r : seen) {
    ASSERT_GE(r.group, 0);
    ASSERT_LT(r.group, static_cast<int>(ranges.size()));
    EXPECT_EQ(r.lo, ranges[r.group].lo);
    EXPECT_EQ(r.hi, ranges[r.group].hi);
    EXPECT_FALSE(hit[r.group]) << "group reported twice";
    hit[r.group] = true;
  }
  // Ready in flat order: the first reported range is the first one.
  EXPECT_EQ(seen.front().lo, 0);
  tensor::FlatStorage& st = model.storage();
  const double once = AbsSum(st.grads(), st.size());
  EXPECT_GT(once, 0);
  // beta 1 accumulates into the same buffer: the same batch doubles it.
  ASSERT_TRUE(model.Forward(s.batch()).ok());
  ASSERT_TRUE(model.Backward(1.f, nullptr).ok());
  EXPECT_NEAR(AbsSum(st.grads(), st.size()), 2 * once, 1e-3 * once);
  // beta 0 zeroes it in place first.
  ASSERT_TRUE(model.Forward(s.batch()).ok());
  ASSERT_TRUE(model.Backward(0.f, nullptr).ok());
  EXPECT_NEAR(AbsSum(st.grads(), st.size()), once, 1e-3 * once);
  // Parameters are read from the flat buffer: changing it changes the loss.
  const float before = *model.loss();
  for (int64_t i = 0; i < st.size(); ++i) st.params()[i] = 0.f;
  ASSERT_TRUE(model.Forward(s.batch()).ok());
  EXPECT_NEAR(*model.loss(), std::log(10.0), 1e-5);
  ASSERT_TRUE(model.Initialize(1).ok());
  ASSERT_TRUE(model.Forward(s.batch()).ok());
  EXPECT_FLOAT_EQ(*model.loss(), before);
}

TEST(TorchScriptModelTest, BuffersRoundTripAndTheProbeLeavesThemAlone) {
  kernels::CpuBackend be;
  auto a = Load(kCnn, &be);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::string initial = (*a)->SaveBuffers();
  // running_mean/var and num_batches_tracked of two BatchNorms.
  EXPECT_GT(initial.size(), 4u * (16 + 16 + 32 + 32));
  const Samples s(8);
  ASSERT_TRUE((*a)->Forward(s.batch()).ok());
  const std::string trained = (*a)->SaveBuffers();
  EXPECT_NE(trained, initial) << "a training forward updates the running statistics";
  // Evaluation uses them and leaves them unchanged.
  (*a)->SetTraining(false);
  ASSERT_TRUE((*a)->Forward(s.batch()).ok());
  EXPECT_EQ((*a)->SaveBuffers(), trained);
  (*a)->SetTraining(true);
  auto b = Load(kCnn, &be);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->SaveBuffers(), initial);
  ASSERT_TRUE((*b)->LoadBuffers(trained).ok());
  EXPECT_EQ((*b)->SaveBuffers(), trained);
  absl::Status bad = (*b)->LoadBuffers(trained.substr(0, trained.size() - 4));
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
}

TEST(TorchScriptModelTest, AnExportedLossIsUsed) {
  kernels::CpuBackend be;
  auto m = Load(TestModule("with_loss"), &be);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE((*m)->has_loss_method());
  const Samples s(8);
  (*m)->SetTraining(false);
  ASSERT_TRUE((*m)->Forward(s.batch()).ok());
  double ce = 0;
  for (int i = 0; i < 8; ++i) ce -= std::log((*m)->probs()[i * 10 + s.y[i]]);
  ce /= 8;
  // Label smoothing 0.1 makes the module's loss differ from plain CE.
  EXPECT_GT(std::fabs(*(*m)->loss() - ce), 1e-3) << *(*m)->loss() << " vs " << ce;
  (*m)->SetTraining(true);
  ASSERT_TRUE((*m)->Forward(s.batch()).ok());
  ASSERT_TRUE((*m)->Backward(0.f, nullptr).ok());
  EXPECT_GT(AbsSum((*m)->storage().grads(), (*m)->storage().size()), 0);
}

std::string TextFile() {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/not_a_module.txt";
  std::ofstream(path) << "import torch\n";
  return path;
}

// Trains `m` for `steps` SGD-momentum steps on `s`.
void Train(TorchScriptModel& m, optim::Optimizer& opt, const Samples& s, int first, int steps) {
  tensor::FlatStorage& st = m.storage();
  for (int step = first; step < first + steps; ++step) {
    ASSERT_TRUE(m.Forward(s.batch()).ok());
    ASSERT_TRUE(m.Backward(0.f, nullptr).ok());
    optim::StepContext c;
    c.step = step;
    c.lr = 0.05f;
    ASSERT_TRUE(opt.Step(st.params(), st.grads(), st.size(), c).ok());
  }
}

// What a checkpoint holds for a torchscript: module (parameters, optimizer
// state, SaveBuffers) is all of its state: a model resumed from it trains on
// bit for bit. Without the buffers (BatchNorm's running statistics) the
// evaluation diverges, so the test would catch a buffer left out.
TEST(TorchScriptModelTest, ResumeWithBuffersIsBitIdentical) {
  kernels::CpuBackend be;
  auto a = Load(kCnn, &be);
  ASSERT_TRUE(a.ok()) << a.status();
  const int64_t n = (*a)->storage().size();
  optim::SgdOptions so;
  so.momentum = 0.9f;
  auto opt_a = *optim::Sgd::Create({0, n}, so);
  const Samples s(8);
  Train(**a, *opt_a, s, 1, 5);
  // The checkpoint: parameters, momentum, buffers.
  const std::vector<float> params((*a)->storage().params(), (*a)->storage().params() + n);
  const std::vector<float> momentum(opt_a->state()[0].data.begin(), opt_a->state()[0].data.end());
  const std::string buffers = (*a)->SaveBuffers();

  for (bool with_buffers : {true, false}) {
    auto b = Load(kCnn, &be);
    ASSERT_TRUE(b.ok());
    std::copy(params.begin(), params.end(), (*b)->storage().params());
    auto opt_b = *optim::Sgd::Create({0, n}, so);
    std::copy(momentum.begin(), momentum.end(), opt_b->state()[0].data.begin());
    if (with_buffers) ASSERT_TRUE((*b)->LoadBuffers(buffers).ok());
    Train(**b, *opt_b, s, 6, 5);
    if (with_buffers) Train(**a, *opt_a, s, 6, 5);
    (*a)->SetTraining(false);
    (*b)->SetTraining(false);
    ASSERT_TRUE((*a)->Forward(s.batch()).ok());
    ASSERT_TRUE((*b)->Forward(s.batch()).ok());
    const float loss_a = *(*a)->loss(), loss_b = *(*b)->loss();
    (*a)->SetTraining(true);
    if (with_buffers) {
      EXPECT_EQ(0, std::memcmp((*a)->storage().params(), (*b)->storage().params(), n * 4));
      EXPECT_EQ((*a)->SaveBuffers(), (*b)->SaveBuffers());
      EXPECT_EQ(loss_a, loss_b);
    } else {
      EXPECT_NE((*a)->SaveBuffers(), (*b)->SaveBuffers());
      EXPECT_NE(loss_a, loss_b) << "evaluation does not depend on the buffers?";
    }
  }
}

struct BadCase {
  std::string path;
  int classes;
  std::vector<std::string> expected;
};

TEST(TorchScriptModelTest, BadModulesAreRefusedNamingFileAndProblem) {
  kernels::CpuBackend be;
  const std::vector<BadCase> cases = {
      {"common/torchscript/testdata/missing.pt", 10, {"missing.pt", "no such file"}},
      {TestModule("pickle"), 10, {"pickle.pt", "not a TorchScript archive", "torch.save"}},
      {TextFile(), 10, {"not_a_module.txt", "not a TorchScript archive"}},
      {TestModule("two_inputs"), 10, {"two_inputs.pt", "forward(x: Tensor, y: Tensor)",
                                      "exactly one tensor"}},
      {TestModule("no_params"), 10, {"no_params.pt", "no parameters"}},
      {TestModule("int_params"), 10, {"int_params.pt", "parameter steps is Long", "float32"}},
      {TestModule("seven_classes"), 10, {"seven_classes.pt", "[2, 7]", "[2, 10]", "10 classes"}},
      {kCnn, 5, {"cnn.pt", "[2, 10]", "[2, 5]"}},
      {TestModule("wants_images"), 10, {"wants_images.pt", "forward failed",
                                        "[2, 784] Float", "[-1, 3, 32, 32]"}},
  };
  for (const BadCase& c : cases) {
    auto m = Load(c.path, &be, c.classes);
    ASSERT_FALSE(m.ok()) << c.path;
    EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << m.status();
    for (const std::string& e : c.expected) {
      EXPECT_TRUE(absl::StrContains(m.status().message(), e))
          << "missing '" << e << "' in: " << m.status().message();
    }
    EXPECT_FALSE(absl::StrContains(m.status().message(), "Exception raised from"))
        << m.status().message();
  }
}

}  // namespace
}  // namespace torchscript
}  // namespace tandem
