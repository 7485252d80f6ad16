// Issue 9 part 8, at the sync level without the worker: a small GPT on
// byte-level text converted by tools/convert and drawn through the data
// server's BatchStream. Two Gloo ranks (a thread each, in-memory store) at
// per-rank batch b, synchronised by AllreduceSync, end with the parameters
// of one process at batch 2b after the same steps from the same seed.
//
// The data half of the claim is checked too: for every step, rank 0's slice
// followed by rank 1's is exactly the one process's batch (same sample ids,
// same tokens).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce_sync.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "common/data/dataset.h"
#include "tests/gpt/text_batches.h"
#include "tools/convert/convert.h"

namespace tandem {
namespace {

using gpt_testing::TokenBatch;

// The gpt:layers=2,d=32,heads=2,ctx=16 in ParseModelSpec's keys.
constexpr char kSpec[] = "gpt:layers=2,heads=2,width=32,context=16,vocab=256";
constexpr int kContext = 16;
constexpr int kWorld = 2;
constexpr int kPerRankBatch = 4;
constexpr int kSteps = 5;
constexpr uint64_t kModelSeed = 7;

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/" + name;
  mkdir(p.c_str(), 0755);
  return p;
}

// Converts generated text into a train dataset of ctx-16 windows, once.
const data::Dataset& TrainSet() {
  static const data::Dataset* ds = [] {
    const std::string dir = TmpDir("gpt_eq");
    const std::string text =
        gpt_testing::WriteSyntheticText(dir + "/text.txt", 40000, /*seed=*/3);
    convert::TextOptions o;
    o.seq_len = kContext;
    auto r = convert::TextToShards({text}, o, {.out_dir = TmpDir("gpt_eq_train"), .name = "t"},
                                   {.out_dir = TmpDir("gpt_eq_eval"), .name = "t"});
    EXPECT_TRUE(r.ok()) << r.status();
    auto opened = data::OpenDataset("text/train", TmpDir("gpt_eq_train"));
    EXPECT_TRUE(opened.ok()) << opened.status();
    return opened.ok() ? opened->release() : nullptr;
  }();
  return *ds;
}

v1::StreamBatchesRequest Request(int rank, int world) {
  v1::StreamBatchesRequest r;
  r.set_seed(11);
  r.set_global_batch_size(kWorld * kPerRankBatch);
  r.set_rank(rank);
  r.set_world_size(world);
  r.set_shuffle(true);
  return r;
}

std::unique_ptr<optim::Optimizer> MakeOptimizer(bool adamw, int64_t n) {
  if (adamw) return *optim::AdamW::Create({0, n}, optim::AdamWOptions{});
  optim::SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 1e-4f;
  return *optim::Sgd::Create({0, n}, o);
}

optim::StepContext Context(bool adamw, int step) {
  optim::StepContext c;
  c.step = step;
  // AdamW's m / sqrt(v) turns rounding-level gradient differences of
  // near-zero gradients into up to lr-sized steps; a small lr keeps those
  // far below the tolerance while training still moves parameters ~5e-3.
  c.lr = adamw ? 1e-3f : 0.1f;
  return c;
}

struct Trained {
  std::vector<float> initial, final;
  std::vector<float> losses;  // per step
};

absl::StatusOr<Trained> TrainOneProcess(bool adamw, const std::vector<TokenBatch>& batches) {
  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = kWorld * kPerRankBatch;
  mo.seed = kModelSeed;
  ASSIGN_OR_RETURN(auto model, nn::CreateModel(kSpec, &backend, mo));
  tensor::FlatStorage& s = model->storage();
  Trained t;
  t.initial.assign(s.params(), s.params() + s.size());
  auto opt = MakeOptimizer(adamw, s.size());
  for (int step = 1; step <= kSteps; ++step) {
    RETURN_IF_ERROR(model->Forward(batches[step - 1].view()));
    t.losses.push_back(*model->loss());
    RETURN_IF_ERROR(model->Backward(0.f, nullptr));
    RETURN_IF_ERROR(opt->Step(s.params(), s.grads(), s.size(), Context(adamw, step)));
  }
  t.final.assign(s.params(), s.params() + s.size());
  return t;
}

absl::Status TrainRank(bool adamw, const std::vector<TokenBatch>& batches, Communicator& comm,
                       std::vector<float>* params) {
  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = kPerRankBatch;
  mo.seed = kModelSeed;
  ASSIGN_OR_RETURN(auto model, nn::CreateModel(kSpec, &backend, mo));
  sync::AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = model->storage().params();
  o.grads = model->storage().grads();
  o.size = model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(model->layout())) {
    o.ready_ranges.push_back({r.lo, r.hi});
  }
  o.bucket_cap_mb = 0.01;  // several buckets, as in a real run
  o.optimizer = MakeOptimizer(adamw, o.size);
  ASSIGN_OR_RETURN(auto sync, sync::CreateAllreduceSync(std::move(o)));
  const nn::GradReadyCallback on_ready = [&](const nn::GradRange& r) {
    sync->OnGradientsReady(r.lo, r.hi);
  };
  for (int step = 1; step <= kSteps; ++step) {
    RETURN_IF_ERROR(sync->BeforeForward());
    RETURN_IF_ERROR(model->Forward(batches[step - 1].view()));
    RETURN_IF_ERROR(sync->BeginStep({}));
    RETURN_IF_ERROR(model->Backward(0.f, on_ready));
    RETURN_IF_ERROR(sync->FinishStep(Context(adamw, step)));
  }
  params->assign(model->storage().params(),
                 model->storage().params() + model->storage().size());
  return absl::OkStatus();
}

// One thread per rank, Gloo over one in-memory store.
std::vector<absl::Status> RunRanks(
    const std::function<absl::Status(int rank, Communicator& comm)>& body) {
  gloo::rendezvous::HashStore store;
  std::vector<absl::Status> results(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions o;
      o.rank = r;
      o.world_size = kWorld;
      o.store = &store;
      o.timeout = absl::Seconds(60);
      auto comm = GlooCommunicator::Create(o);
      results[r] = comm.ok() ? body(r, **comm) : comm.status();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

double MaxAbsDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double{a[i]} - b[i]));
  return m;
}

double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    n += double{b[i]} * b[i];
  }
  return std::sqrt(d / std::max(n, 1e-30));
}

class GptEquivalence : public ::testing::TestWithParam<bool> {};  // adamw?

TEST_P(GptEquivalence, TwoRanksMatchOneProcessAtTwiceTheBatch) {
  const bool adamw = GetParam();
  const data::Dataset& ds = TrainSet();
  ASSERT_GT(ds.num_samples(), kSteps * kWorld * kPerRankBatch);

  auto single = gpt_testing::DrawBatches(ds, Request(0, 1), kSteps);
  ASSERT_TRUE(single.ok()) << single.status();
  std::vector<std::vector<TokenBatch>> per_rank(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    auto b = gpt_testing::DrawBatches(ds, Request(r, kWorld), kSteps);
    ASSERT_TRUE(b.ok()) << b.status();
    per_rank[r] = *std::move(b);
  }
  // The data: the ranks' slices, concatenated, are the one process's batch.
  for (int step = 0; step < kSteps; ++step) {
    std::vector<int64_t> ids;
    std::vector<int32_t> tokens, labels;
    for (int r = 0; r < kWorld; ++r) {
      const TokenBatch& b = per_rank[r][step];
      ASSERT_EQ(b.sample_ids.size(), static_cast<size_t>(kPerRankBatch));
      ASSERT_EQ(b.tokens.size(), static_cast<size_t>(kPerRankBatch * kContext));
      ids.insert(ids.end(), b.sample_ids.begin(), b.sample_ids.end());
      tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
      labels.insert(labels.end(), b.labels.begin(), b.labels.end());
    }
    EXPECT_EQ(ids, (*single)[step].sample_ids) << "step " << step;
    EXPECT_EQ(tokens, (*single)[step].tokens) << "step " << step;
    EXPECT_EQ(labels, (*single)[step].labels) << "step " << step;
  }

  auto reference = TrainOneProcess(adamw, *single);
  ASSERT_TRUE(reference.ok()) << reference.status();
  // Real text at initialisation: the loss is near ln(256) = 5.55.
  EXPECT_NEAR(reference->losses.front(), std::log(256.0), 0.3);
  // The comparison means something only if training moved the parameters
  // far more than the tolerance.
  const double moved = MaxAbsDifference(reference->final, reference->initial);
  ASSERT_GT(moved, 1e-3);

  std::vector<std::vector<float>> params(kWorld);
  auto results = RunRanks([&](int rank, Communicator& comm) {
    return TrainRank(adamw, per_rank[rank], comm, &params[rank]);
  });
  for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];

  const double max_abs = MaxAbsDifference(params[0], reference->final);
  const double rel = RelativeDifference(params[0], reference->final);
  std::printf("%s %s: %zu parameters, max |2 ranks - 1 process| %.3g, relative %.3g "
              "(training moved them up to %.3g); loss %.4f -> %.4f\n",
              kSpec, adamw ? "adamw" : "sgd", params[0].size(), max_abs, rel, moved,
              reference->losses.front(), reference->losses.back());
  EXPECT_LE(max_abs, 1e-5);
  EXPECT_LE(rel, 1e-5);
  EXPECT_EQ(params[1], params[0]) << "rank 1 diverged from rank 0";
}

INSTANTIATE_TEST_SUITE_P(Optimizers, GptEquivalence, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "AdamW" : "SgdMomentum");
                         });

}  // namespace
}  // namespace tandem
