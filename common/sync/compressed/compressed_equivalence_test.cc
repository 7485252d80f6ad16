// The `compressed` strategy on an MLP through the registry, N Gloo ranks (a
// thread each):
// - a checkpoint after K1 steps, restored the way services/worker's
//   checkpointer restores (rank 0 gets the saved extra state, the others
//   zeros, then StateLoaded on every rank), continues bit-identically to an
//   uninterrupted run, for int8 (stochastic rounding: the seeds' step
//   counter restores too), top-k and threshold (their thresholds restore);
//   dropping the residuals changes the result (the check can fail); also
//   for int8 with hier=1 on 2 nodes of 2 ranks (the residuals of node
//   shares); and with momentum_correction=1 (topk at 2 and 3 ranks,
//   threshold, and across the end of a warm-up), whose velocity restores
//   too (dropping it changes the result);
// - resumed at another world size the residuals (and velocity) reset: the
//   run equals one started from the same parameters with fresh residuals;
//   PowerSGD keeps its Q there and restores Q, residuals and its step count
//   bit-identically at the same world size;
// - int8+EF and top-k+EF train close to allreduce on the same data.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/groups.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "common/sync/testing/synthetic_training.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using sync_testing::RelativeDifference;

constexpr int kBatch = 8;  // per rank
constexpr char kMlp[] = "mlp:20,32,16,5";

struct Data {
  std::vector<float> features;
  std::vector<int32_t> labels;
  nn::Batch Slice(int first, int count) const {
    nn::Batch b;
    b.size = count;
    b.features = features.data() + static_cast<size_t>(first) * 20;
    b.labels = labels.data() + first;
    return b;
  }
};

// A learnable problem: the label is the argmax of a fixed linear map.
Data MakeData(int samples) {
  Data d;
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> w(20 * 5);
  for (float& x : w) x = normal(rng);
  d.features.resize(static_cast<size_t>(samples) * 20);
  for (float& x : d.features) x = normal(rng);
  for (int s = 0; s < samples; ++s) {
    int best = 0;
    float best_v = -1e30f;
    for (int c = 0; c < 5; ++c) {
      float v = 0;
      for (int f = 0; f < 20; ++f) v += w[c * 20 + f] * d.features[s * 20 + f];
      if (v > best_v) best_v = v, best = c;
    }
    d.labels.push_back(best);
  }
  return d;
}

struct RankRun {
  kernels::CpuBackend backend;
  std::unique_ptr<nn::Model> model;
  CommGroups* groups = nullptr;  // the rank's, borrowed
  std::unique_ptr<GradientSync> sync;
};

// Runs `body` on `world` ranks: Gloo ranks without node groups, or (with
// per_node > 0) nodes of per_node ranks with their intra / inter groups.
using RankBody = std::function<absl::Status(int rank, CommGroups& groups)>;
std::vector<absl::Status> RunRanks(int world, int per_node, const RankBody& body) {
  if (per_node == 0) {
    return comm_testing::RunGlooRanks(world, [&](int rank, Communicator& comm) {
      CommGroups groups;
      groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
      return body(rank, groups);
    });
  }
  static int runs = 0;  // shm segment names must not repeat
  std::vector<std::string> nodes;
  for (int r = 0; r < world; ++r) nodes.push_back(absl::StrCat("node", r / per_node));
  return hier_testing::RunGroupRanks(
      nodes, /*node_groups=*/true, absl::StrCat("compressed_eq_", getpid(), "_", runs++), body);
}

absl::Status SetUp(const std::string& strategy, const std::string& sync_opt, CommGroups& groups,
                   RankRun* run) {
  nn::ModelOptions mo;
  mo.max_batch = kBatch;
  mo.seed = 7;
  ASSIGN_OR_RETURN(run->model, nn::CreateModel(kMlp, &run->backend, mo));
  run->groups = &groups;
  ASSIGN_OR_RETURN(SyncOptions so, ParseSyncOptions(strategy, sync_opt));
  so.bucket_cap_mb = 0.002;  // ~500 floats: several buckets
  SyncEnv env;
  env.comms = run->groups;
  env.params = run->model->storage().params();
  env.grads = run->model->storage().grads();
  env.size = run->model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(run->model->layout())) {
    env.ready_ranges.push_back({r.lo, r.hi});
  }
  for (const tensor::ParameterInfo& p : run->model->layout().params()) {
    env.param_shapes.push_back({p.offset, p.shape});
  }
  // As the worker: a strategy that takes the momentum over gets it in the
  // env, and the optimizer steps without it.
  ASSIGN_OR_RETURN(const StrategyInfo info, FindStrategy(strategy));
  const bool takes_momentum = TakesMomentum(info, so);
  env.momentum = takes_momentum ? 0.9f : 0.f;
  env.make_optimizer = [takes_momentum](optim::ParamRange r)
      -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    optim::SgdOptions o;
    o.momentum = takes_momentum ? 0.f : 0.9f;
    ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(r, o));
    return std::unique_ptr<optim::Optimizer>(std::move(s));
  };
  ASSIGN_OR_RETURN(run->sync, CreateGradientSync(so, std::move(env)));
  return absl::OkStatus();
}

// Steps [first, last] (1-based); step s uses samples from (s - 1) * world * kBatch.
absl::Status Train(RankRun& run, const Data& data, int first, int last, float* loss = nullptr) {
  const int world = run.groups->world->world_size(), rank = run.groups->world->rank();
  for (int step = first; step <= last; ++step) {
    const int start = ((step - 1) * world + rank) * kBatch % (static_cast<int>(data.labels.size()) - kBatch);
    RETURN_IF_ERROR(run.model->Forward(data.Slice(start, kBatch)));
    if (loss != nullptr) *loss = *run.model->loss();
    RETURN_IF_ERROR(run.sync->BeginStep({}));
    RETURN_IF_ERROR(run.model->Backward(0.f, [&run](const nn::GradRange& r) {
      run.sync->OnGradientsReady(r.lo, r.hi);
    }));
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = 0.05f;
    RETURN_IF_ERROR(run.sync->FinishStep(ctx));
  }
  return absl::OkStatus();
}

std::vector<float> Params(RankRun& run) {
  const tensor::FlatStorage& s = run.model->storage();
  return std::vector<float>(s.params(), s.params() + s.size());
}

// What a checkpoint holds: params, optimizer state and rank 0's extra state.
struct Saved {
  std::vector<float> params;
  std::map<std::string, std::vector<float>> optimizer;
  std::map<std::string, std::vector<float>> extra;
};

absl::Status Save(RankRun& run, Saved* saved) {
  RETURN_IF_ERROR(run.sync->SyncStateToHost());  // collective
  if (run.groups->world->rank() != 0) return absl::OkStatus();
  saved->params = Params(run);
  for (const optim::StateBuffer& b : run.sync->optimizer()->state()) {
    saved->optimizer[b.name].assign(b.data.begin(), b.data.end());
  }
  for (const optim::StateBuffer& b : run.sync->extra_state()) {
    saved->extra[b.name].assign(b.data.begin(), b.data.end());
  }
  return absl::OkStatus();
}

// As services/worker/checkpointer.cc: everything but the extra state is
// the same on every rank; the extra state reaches rank 0 only, where its
// size still fits; the others start from zeros.
absl::Status Load(RankRun& run, const Saved& saved) {
  std::copy(saved.params.begin(), saved.params.end(), run.model->storage().params());
  for (optim::StateBuffer& b : run.sync->optimizer()->state()) {
    const std::vector<float>& v = saved.optimizer.at(b.name);
    std::copy(v.begin(), v.end(), b.data.begin());
  }
  for (optim::StateBuffer& b : run.sync->extra_state()) {
    auto it = saved.extra.find(b.name);
    if (run.groups->world->rank() == 0 && it != saved.extra.end() &&
        it->second.size() == b.data.size()) {
      std::copy(it->second.begin(), it->second.end(), b.data.begin());
    } else {
      std::fill(b.data.begin(), b.data.end(), 0.f);
    }
  }
  return run.sync->StateLoaded();  // collective
}

constexpr int kK1 = 4, kK2 = 4;

std::vector<std::vector<float>> Uninterrupted(int world, const std::string& opts,
                                              const Data& data, int per_node = 0) {
  std::vector<std::vector<float>> params(world);
  auto results = RunRanks(world, per_node, [&](int rank, CommGroups& groups) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUp("compressed", opts, groups, &run));
    RETURN_IF_ERROR(Train(run, data, 1, kK1 + kK2));
    params[rank] = Params(run);
    return absl::OkStatus();
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
  return params;
}

// K1 steps at save_world, save, resume at load_world for K2 steps.
// `drop` removes the named extra states from the checkpoint.
std::vector<std::vector<float>> Resumed(int save_world, int load_world, const std::string& opts,
                                        const Data& data,
                                        const std::vector<std::string>& drop = {},
                                        int per_node = 0) {
  Saved saved;
  auto results = RunRanks(save_world, per_node, [&](int rank, CommGroups& groups) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUp("compressed", opts, groups, &run));
    RETURN_IF_ERROR(Train(run, data, 1, kK1));
    return Save(run, &saved);
  });
  for (int r = 0; r < save_world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
  for (const std::string& name : drop) saved.extra.erase(name);
  std::vector<std::vector<float>> params(load_world);
  results = RunRanks(load_world, per_node, [&](int rank, CommGroups& groups) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUp("compressed", opts, groups, &run));
    RETURN_IF_ERROR(Load(run, saved));
    RETURN_IF_ERROR(Train(run, data, kK1 + 1, kK1 + kK2));
    params[rank] = Params(run);
    return absl::OkStatus();
  });
  for (int r = 0; r < load_world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
  return params;
}

struct ResumeCase {
  std::string opts;
  int world;
  int per_node = 0;  // > 0: nodes of this many ranks (hier=1 runs hierarchically)
  // Each of these, dropped from the checkpoint, changes the continuation.
  std::vector<std::string> needed = {"compressed/residuals"};
};

const std::vector<std::string> kResidualsAndVelocity = {"compressed/residuals",
                                                        "compressed/velocity"};

class CompressedResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(CompressedResume, RestoresResidualsBitIdentically) {
  const ResumeCase c = GetParam();
  const Data data = MakeData(512);
  const auto whole = Uninterrupted(c.world, c.opts, data, c.per_node);
  const auto resumed = Resumed(c.world, c.world, c.opts, data, {}, c.per_node);
  ASSERT_FALSE(whole[0].empty());
  for (int r = 0; r < c.world; ++r) {
    ASSERT_EQ(resumed[r], whole[r]) << c.opts << " rank " << r;
    ASSERT_EQ(whole[r], whole[0]) << "ranks agree";
  }
  // Without the residuals (or the velocity) the continuation differs: the
  // test can fail.
  for (const std::string& name : c.needed) {
    const auto dropped = Resumed(c.world, c.world, c.opts, data, {name}, c.per_node);
    ASSERT_FALSE(dropped[0].empty());
    EXPECT_NE(dropped[0], whole[0]) << c.opts << " without " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, CompressedResume,
    ::testing::Values(ResumeCase{"codec=int8,rounding=stochastic,chunk=256", 2},
                      ResumeCase{"codec=int8", 3}, ResumeCase{"codec=topk,k=0.05,warmup_steps=0,momentum_correction=0", 2},
                      ResumeCase{"codec=threshold,density=0.05,warmup_steps=0,momentum_correction=0", 3},
                      ResumeCase{"codec=fp16", 2}, ResumeCase{"codec=int8,hier=1", 4, 2},
                      ResumeCase{"codec=topk,k=0.05,momentum_correction=1,masking=1,warmup_steps=0", 2, 0,
                                 kResidualsAndVelocity},
                      ResumeCase{"codec=topk,k=0.05,momentum_correction=1,masking=1,warmup_steps=0", 3, 0,
                                 kResidualsAndVelocity},
                      ResumeCase{"codec=threshold,density=0.05,momentum_correction=1,masking=1,warmup_steps=0", 2, 0,
                                 kResidualsAndVelocity},
                      ResumeCase{"codec=topk,k=0.05,momentum_correction=1,masking=0,warmup_steps=0", 2, 0,
                                 kResidualsAndVelocity},
                      // Saved inside the warm-up (residuals still zero),
                      // resumed across its end: the velocity carries on.
                      ResumeCase{"codec=topk,k=0.05,momentum_correction=1,masking=1,warmup_steps=6", 2,
                                 0, {"compressed/velocity"}},
                      // PowerSGD: Q (warm start) and the residuals restore;
                      // the step count too (saved inside the warm-up).
                      ResumeCase{"codec=powersgd,rank=2,warmup_steps=1", 2, 0,
                                 {"powersgd/residuals", "powersgd/q"}},
                      ResumeCase{"codec=powersgd,rank=1,warmup_steps=1", 3, 0,
                                 {"powersgd/residuals", "powersgd/q"}},
                      ResumeCase{"codec=powersgd,rank=2,warmup_steps=6", 2, 0,
                                 {"powersgd/meta"}}),
    [](const ::testing::TestParamInfo<ResumeCase>& i) {
      std::string s = absl::StrCat(i.param.opts, "_w", i.param.world,
                                   i.param.per_node > 0 ? absl::StrCat("_l", i.param.per_node) : "");
      for (char& ch : s) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return s;
    });

TEST(CompressedResume, AnotherWorldSizeResetsTheResiduals) {
  const Data data = MakeData(512);
  const std::string opts = "codec=int8";
  const auto resumed = Resumed(2, 3, opts, data);
  // The same parameters and optimizer state, no compression state at all.
  const auto fresh = Resumed(2, 3, opts, data, {"compressed/meta"});
  ASSERT_FALSE(resumed[0].empty());
  EXPECT_EQ(resumed[0], fresh[0]);
  // And it is not what keeping stale residuals would give: at 2 ranks they
  // would have changed the result (see RestoresResidualsBitIdentically).
}

// PowerSGD at another world size: the residuals reset (as if the
// checkpoint had none), Q is kept (dropping it changes the result).
TEST(CompressedResume, PowerSgdAtAnotherWorldSizeKeepsQResetsResiduals) {
  const Data data = MakeData(512);
  const std::string opts = "codec=powersgd,rank=2,warmup_steps=1";
  const auto resumed = Resumed(2, 3, opts, data);
  const auto no_residuals = Resumed(2, 3, opts, data, {"powersgd/residuals"});
  const auto no_q = Resumed(2, 3, opts, data, {"powersgd/q"});
  ASSERT_FALSE(resumed[0].empty());
  EXPECT_EQ(resumed[0], no_residuals[0]);
  EXPECT_NE(resumed[0], no_q[0]);
}

// The velocity too: at another world size (its saved blob does not fit)
// it starts from zero, as in a checkpoint that never had one.
TEST(CompressedResume, AnotherWorldSizeResetsTheVelocity) {
  const Data data = MakeData(512);
  const std::string opts = "codec=topk,k=0.05,momentum_correction=1,masking=1,warmup_steps=0";
  const auto resumed = Resumed(2, 3, opts, data);
  const auto fresh = Resumed(2, 3, opts, data, {"compressed/meta", "compressed/velocity"});
  ASSERT_FALSE(resumed[0].empty());
  EXPECT_EQ(resumed[0], fresh[0]);
  // A checkpoint written without momentum_correction (no velocity; its
  // residuals load) resumes with momentum_correction.
  const auto same_world = Resumed(2, 2, opts, data, {"compressed/velocity"});
  const auto whole = Uninterrupted(2, opts, data);
  ASSERT_FALSE(same_world[0].empty());
  EXPECT_NE(same_world[0], whole[0]) << "the velocity restarted from zero";
}

// Rank 0 holds every rank's residuals only around a checkpoint: the next
// BeginStep gives them back, and the next checkpoint gathers them again.
TEST(CompressedResume, RankZeroFreesTheGatheredStateAfterTheCheckpoint) {
  const Data data = MakeData(512);
  // momentum_correction's gathered velocity (world x parameters) as well.
  for (const std::string opts : {"codec=int8", "codec=topk,k=0.05,momentum_correction=1,warmup_steps=0"}) {
    SCOPED_TRACE(opts);
    const bool velocity = opts.find("momentum_correction=1") != std::string::npos;
    int64_t staging[2][3] = {};
    size_t second_size = 0, second_velocity = 0;
    auto results = RunRanks(2, 0, [&](int rank, CommGroups& groups) -> absl::Status {
      RankRun run;
      RETURN_IF_ERROR(sync::SetUp("compressed", opts, groups, &run));  // not Test::SetUp
      RETURN_IF_ERROR(Train(run, data, 1, 2));
      staging[rank][0] = run.sync->memory().staging_bytes;
      Saved first;
      RETURN_IF_ERROR(Save(run, &first));
      staging[rank][1] = run.sync->memory().staging_bytes;
      RETURN_IF_ERROR(Train(run, data, 3, 3));
      staging[rank][2] = run.sync->memory().staging_bytes;
      Saved second;
      RETURN_IF_ERROR(Save(run, &second));
      if (rank == 0) {
        second_size = second.extra.at("compressed/residuals").size();
        if (velocity) second_velocity = second.extra.at("compressed/velocity").size();
      }
      return absl::OkStatus();
    });
    for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
    EXPECT_GT(staging[0][1], staging[0][0]) << "rank 0 gathered for the checkpoint";
    EXPECT_EQ(staging[0][2], staging[0][0]) << "and gave it back at the next step";
    EXPECT_EQ(staging[1][1], staging[1][0]) << "rank 1 never gathers";
    EXPECT_GT(second_size, 0u) << "the next checkpoint gathers again";
    if (velocity) EXPECT_GT(second_velocity, 2u) << "the velocity too";
  }
}

// Mean loss of `run`'s model over the first `samples` samples (no update).
absl::StatusOr<double> EvalLoss(RankRun& run, const Data& data, int samples) {
  double sum = 0;
  for (int s = 0; s + kBatch <= samples; s += kBatch) {
    RETURN_IF_ERROR(run.model->Forward(data.Slice(s, kBatch)));
    sum += *run.model->loss();
  }
  return sum / (samples / kBatch);
}

struct Trained {
  std::vector<float> params;
  double eval_loss = 0;
};

// Trains `steps` at 4 ranks; returns rank 0's params and its held-out loss.
Trained TrainWith(const std::string& strategy, const std::string& opts, const Data& train,
                  const Data& eval, int steps) {
  Trained out;
  auto results = RunRanks(4, 0, [&](int rank, CommGroups& groups) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUp(strategy, opts, groups, &run));
    RETURN_IF_ERROR(Train(run, train, 1, steps));
    if (rank == 0) {
      out.params = Params(run);
      ASSIGN_OR_RETURN(out.eval_loss, EvalLoss(run, eval, 512));
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
  return out;
}

// A small stand-in for the Fashion-MNIST check (which is in
// tools/bench/strategies.sh): 100 steps at 4 ranks on a learnable problem.
TEST(CompressedTraining, Int8AndTopkWithFeedbackTrackAllreduce) {
  const Data train = MakeData(4096);
  Data eval = MakeData(4096 + 512);  // same map; the last 512 samples are unseen
  eval.features.erase(eval.features.begin(), eval.features.begin() + 4096 * 20);
  eval.labels.erase(eval.labels.begin(), eval.labels.begin() + 4096);
  constexpr int kSteps = 100;
  const Trained reference = TrainWith("allreduce", "", train, eval, kSteps);
  struct Expect {
    std::string opts;
    double max_difference;  // of the parameters, relative to allreduce's
    double max_loss_gap;    // held-out loss above allreduce's
  };
  double topk_ef = 0, topk_no_ef = 0;
  for (const Expect& e : {Expect{"codec=int8", 0.05, 0.01}, Expect{"codec=fp16", 0.05, 0.01},
                          Expect{"codec=bf16", 0.05, 0.01},
                          Expect{"codec=topk,k=0.1,warmup_steps=0,momentum_correction=0", 0.25, 0.05},
                          Expect{"codec=topk,k=0.1,ef=0,warmup_steps=0", 1e9, 1e9}}) {
    const Trained t = TrainWith("compressed", e.opts, train, eval, kSteps);
    const double diff = RelativeDifference(t.params, reference.params);
    std::printf("%-22s: parameters %.3g from allreduce's, held-out loss %.4f (allreduce %.4f)\n",
                e.opts.c_str(), diff, t.eval_loss, reference.eval_loss);
    EXPECT_LE(diff, e.max_difference) << e.opts;
    EXPECT_LE(t.eval_loss, reference.eval_loss + e.max_loss_gap) << e.opts;
    if (e.opts == "codec=topk,k=0.1,warmup_steps=0,momentum_correction=0") topk_ef = diff;
    if (e.opts == "codec=topk,k=0.1,ef=0,warmup_steps=0") topk_no_ef = diff;
  }
  EXPECT_LT(2 * topk_ef, topk_no_ef) << "error feedback keeps top-k close to allreduce";
}

}  // namespace
}  // namespace sync
}  // namespace tandem
