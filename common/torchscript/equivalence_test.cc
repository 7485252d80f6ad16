// Issue 29's equivalence claims for TorchScript modules, at the model + sync
// level (the worker-level runs are in tests/torchscript):
//
//  - N = 1, 2 and 4 ranks (a thread each, Gloo, AllreduceSync fed by the
//    gradient-accumulator hooks) at per-rank batch b with 2 accumulated
//    micro-batches end with the parameters of one process at batch N b, for
//    the CNN (without BatchNorm, which normalises per rank's batch) and the
//    pre-LN transformer, SGD with momentum and AdamW.
//  - One tandem model + tandem's optimizer equals a plain PyTorch loop
//    (testdata/pytorch_loop.py, run here with /usr/bin/python3) on the same
//    archive, initial weights and batches after 20 steps: the CNN with
//    BatchNorm under SGD, the transformer under AdamW.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/kernels/cpu_backend.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/torchscript/pytorch_reference_testutil.h"
#include "common/torchscript/torchscript_model.h"
#include "gtest/gtest.h"

namespace tandem {
namespace torchscript {
namespace {

constexpr int kAccumulation = 2;

struct Case {
  std::string name;
  std::string module;  // runfiles path
  bool tokens = false;
  int sample = 0;      // elements per sample
  int classes = 0;
  bool adamw = false;
};

// Random samples: f32 features in [0, 1) and class labels, or int32 tokens
// and next-token labels; `n` samples.
struct Data {
  bool tokens = false;
  int sample = 0;
  std::vector<float> features;
  std::vector<int32_t> token_ids;
  std::vector<int32_t> labels;  // [n] or [n, sample]

  Data(const Case& c, int n, uint32_t seed) : tokens(c.tokens), sample(c.sample) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.f, 1.f);
    if (tokens) {
      for (int i = 0; i < n * sample; ++i) token_ids.push_back(static_cast<int32_t>(rng() % 256));
      for (int i = 0; i < n * sample; ++i) labels.push_back(static_cast<int32_t>(rng() % c.classes));
    } else {
      for (int i = 0; i < n * sample; ++i) features.push_back(u(rng));
      for (int i = 0; i < n; ++i) labels.push_back(static_cast<int32_t>(rng() % c.classes));
    }
  }
  nn::Batch Slice(int first, int count) const {
    nn::Batch b;
    b.size = count;
    const int64_t at = int64_t{first} * sample;
    if (tokens) {
      b.tokens = token_ids.data() + at;
      b.labels = labels.data() + at;
    } else {
      b.features = features.data() + at;
      b.labels = labels.data() + first;
    }
    return b;
  }
};

absl::StatusOr<std::unique_ptr<TorchScriptModel>> Load(const Case& c, kernels::Backend* be) {
  nn::ModelSpec spec;
  spec.kind = nn::ModelSpec::Kind::kTorchScript;
  spec.torchscript.path = c.module;
  nn::ModelOptions o;
  o.sample.tokens = c.tokens;
  o.sample.shape = {c.sample};
  o.sample.num_classes = c.classes;
  return TorchScriptModel::Create(spec, be, o);
}

std::unique_ptr<optim::Optimizer> MakeOptimizer(bool adamw, int64_t n) {
  if (adamw) return *optim::AdamW::Create({0, n}, optim::AdamWOptions{});
  optim::SgdOptions o;
  o.momentum = 0.9f;
  return *optim::Sgd::Create({0, n}, o);
}

optim::StepContext Context(bool adamw, int step, float grad_scale) {
  optim::StepContext c;
  c.step = step;
  c.lr = adamw ? 1e-3f : 0.05f;
  c.grad_scale = grad_scale;
  return c;
}

// One process: `steps` steps of `k` micro-batches of `batch` samples.
absl::StatusOr<std::vector<float>> TrainAlone(const Case& c, const Data& d, int steps, int k,
                                              int batch, std::vector<float>* initial) {
  kernels::CpuBackend be;
  ASSIGN_OR_RETURN(auto m, Load(c, &be));
  tensor::FlatStorage& s = m->storage();
  if (initial != nullptr) initial->assign(s.params(), s.params() + s.size());
  auto opt = MakeOptimizer(c.adamw, s.size());
  for (int step = 0; step < steps; ++step) {
    for (int micro = 0; micro < k; ++micro) {
      RETURN_IF_ERROR(m->Forward(d.Slice((step * k + micro) * batch, batch)));
      RETURN_IF_ERROR(m->Backward(micro == 0 ? 0.f : 1.f, nullptr));
    }
    RETURN_IF_ERROR(opt->Step(s.params(), s.grads(), s.size(), Context(c.adamw, step + 1, 1.f / k)));
  }
  return std::vector<float>(s.params(), s.params() + s.size());
}

absl::Status TrainRank(const Case& c, const Data& d, int steps, int batch, int rank, int world,
                       Communicator& comm, std::vector<float>* out) {
  kernels::CpuBackend be;
  ASSIGN_OR_RETURN(auto m, Load(c, &be));
  sync::AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = m->storage().params();
  o.grads = m->storage().grads();
  o.size = m->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(m->layout())) o.ready_ranges.push_back({r.lo, r.hi});
  o.bucket_cap_mb = 0.05;  // several buckets, filled while backward runs
  o.optimizer = MakeOptimizer(c.adamw, o.size);
  ASSIGN_OR_RETURN(auto sync, sync::CreateAllreduceSync(std::move(o)));
  int reported = 0;
  const nn::GradReadyCallback on_ready = [&](const nn::GradRange& r) {
    ++reported;
    sync->OnGradientsReady(r.lo, r.hi);
  };
  for (int step = 0; step < steps; ++step) {
    RETURN_IF_ERROR(sync->BeforeForward());
    for (int micro = 0; micro < kAccumulation; ++micro) {
      const int global = (step * kAccumulation + micro) * batch * world;
      RETURN_IF_ERROR(m->Forward(d.Slice(global + rank * batch, batch)));
      const bool last = micro + 1 == kAccumulation;
      sync::StepOptions so;
      so.grad_scale = 1.f / kAccumulation;
      if (last) RETURN_IF_ERROR(sync->BeginStep(so));
      RETURN_IF_ERROR(m->Backward(micro == 0 ? 0.f : 1.f, last ? on_ready : nullptr));
    }
    RETURN_IF_ERROR(sync->FinishStep(Context(c.adamw, step + 1, 1.f)));
  }
  if (reported != steps * m->layout().num_params()) {
    return absl::InternalError(absl::StrCat("on_ready called ", reported, " times"));
  }
  out->assign(m->storage().params(), m->storage().params() + m->storage().size());
  return absl::OkStatus();
}

double MaxAbs(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::fabs(double{a[i]} - b[i]));
  }
  return m;
}

using torchscript_testing::RelativeDistance;

const Case kCnn{"cnn", "common/torchscript/cnn_nonorm.pt", false, 784, 10, false};
const Case kLm{"lm", "common/torchscript/lm.pt", true, 16, 256, false};

class Equivalence : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(Equivalence, RanksEqualOneProcessAtNTimesTheBatch) {
  Case c = std::get<0>(GetParam());
  c.adamw = std::get<1>(GetParam());
  constexpr int kSteps = 3, kBatch = 4;
  const Data d(c, kSteps * kAccumulation * kBatch * 4, 17);
  for (int world : {1, 2, 4}) {
    std::vector<float> initial;
    auto alone = TrainAlone(c, d, kSteps, kAccumulation, world * kBatch, &initial);
    ASSERT_TRUE(alone.ok()) << alone.status();
    const double moved = MaxAbs(*alone, initial);
    ASSERT_GT(moved, 5e-4) << "training barely moved the parameters";
    std::vector<std::vector<float>> params(world);
    auto results = comm_testing::RunGlooRanks(world, absl::Seconds(120), [&](int rank, Communicator& comm) {
      return TrainRank(c, d, kSteps, kBatch, rank, world, comm, &params[rank]);
    });
    for (int r = 0; r < world; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
    const double max_abs = MaxAbs(params[0], *alone);
    std::printf("%s %s N=%d: max |N ranks - 1 process| %.3g, relative %.3g (moved %.3g)\n",
                c.name.c_str(), c.adamw ? "adamw" : "sgd", world, max_abs,
                RelativeDistance(params[0], *alone), moved);
    EXPECT_LE(RelativeDistance(params[0], *alone), 1e-5) << "N=" << world;
    // AdamW's m / sqrt(v) turns rounding-level differences of near-zero
    // gradients (summed in another order) into steps of up to lr's size.
    EXPECT_LE(max_abs, c.adamw ? 1e-4 : 1e-5) << "N=" << world;
    for (int r = 1; r < world; ++r) EXPECT_EQ(params[r], params[0]) << "rank " << r << " diverged";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, Equivalence,
    ::testing::Combine(::testing::Values(kCnn, kLm), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Case, bool>>& i) {
      return std::get<0>(i.param).name + (std::get<1>(i.param) ? "_AdamW" : "_Sgd");
    });

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

template <typename T>
void WriteRaw(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

// Runs the PyTorch loop and returns its parameters in `model`'s flat layout.
std::vector<float> PyTorchReference(const Case& c, const Data& d, int steps, int batch,
                                    const TorchScriptModel& model) {
  const std::string x = TmpPath(c.name + ".x"), y = TmpPath(c.name + ".y");
  const std::string out = TmpPath(c.name + ".params");
  if (c.tokens) WriteRaw(x, d.token_ids); else WriteRaw(x, d.features);
  WriteRaw(y, d.labels);
  const std::string cmd = absl::StrCat(
      "/usr/bin/python3 common/torchscript/testdata/pytorch_loop.py --module ", c.module,
      " --features ", x, " --labels ", y, " --sample ", c.sample, c.tokens ? " --tokens" : "",
      " --batch ", batch, " --steps ", steps, " --optimizer ", c.adamw ? "adamw" : "sgd",
      " --lr ", c.adamw ? "0.001" : "0.05", c.adamw ? " --weight_decay 0.01" : " --momentum 0.9",
      " --out ", out);
  const int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;
  return torchscript_testing::ReadPyTorchParams(out, model.layout());
}

class PyTorchLoop : public ::testing::TestWithParam<Case> {};

TEST_P(PyTorchLoop, OneModelEqualsAPlainPyTorchLoopAfter20Steps) {
  const Case& c = GetParam();
  constexpr int kSteps = 20, kBatch = 16;
  const Data d(c, kSteps * kBatch, 23);
  std::vector<float> initial;
  auto ours = TrainAlone(c, d, kSteps, 1, kBatch, &initial);
  ASSERT_TRUE(ours.ok()) << ours.status();
  kernels::CpuBackend be;
  auto layout_only = Load(c, &be);
  ASSERT_TRUE(layout_only.ok()) << layout_only.status();
  const std::vector<float> reference = PyTorchReference(c, d, kSteps, kBatch, **layout_only);
  ASSERT_EQ(reference.size(), ours->size());
  const double rel = RelativeDistance(*ours, reference);
  std::printf("%s: tandem vs PyTorch after %d steps: relative %.3g, max abs %.3g (moved %.3g)\n",
              c.name.c_str(), kSteps, rel, MaxAbs(*ours, reference), MaxAbs(reference, initial));
  EXPECT_GT(MaxAbs(reference, initial), 1e-3);
  EXPECT_LE(rel, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Models, PyTorchLoop,
    ::testing::Values(Case{"cnn_batchnorm_sgd", "common/torchscript/cnn.pt", false, 784, 10, false},
                      Case{"lm_adamw", "common/torchscript/lm.pt", true, 16, 256, true}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace torchscript
}  // namespace tandem
