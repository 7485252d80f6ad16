// The ZeRO-3 checks, on N Gloo ranks (a thread each, one in-memory
// store): zero3, built through the registry with the model's parameter hook
// installed, ends within 1e-5 of the allreduce strategy at N = 1, 2, 4
// after K steps, for SGD with momentum and AdamW, with accumulation and
// with clipping, on an MLP (3 layers < N = 4; 1285 parameters, which 4 does
// not divide), a small GPT and a 6-parameter model whose last ranks own
// nothing. Also: per-rank parameter bytes <= 1/N + the two largest layers
// (and exactly the largest adjacent pair: the next layer is prefetched),
// resident pages measured with mincore, the non-finite skip, and a
// checkpoint written as shards by zero3 at N = 4 resuming at N = 2 (zero3
// and allreduce) and allreduce -> zero3.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/comm/groups.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/io/file.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/testing/shard_checkpoint.h"
#include "common/sync/testing/synthetic_training.h"
#include "common/sync/zero/layer_groups.h"
#include "common/sync/zero/zero3_sync.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Data = sync_testing::SyntheticData;
using sync_testing::MakeSyntheticData;
using sync_testing::MakeTestOptimizer;
using sync_testing::RelativeDifference;

constexpr int kPerRankBatch = 8;
constexpr double kBucketCapMb = 0.002;  // ~500 floats: several buckets

constexpr char kMlp[] = "mlp:20,32,16,5";
constexpr char kGpt[] = "gpt:layers=1,heads=2,width=16,context=8,vocab=32";
constexpr char kTiny[] = "mlp:2,2";  // 6 parameters, one layer

struct Case {
  std::string spec;
  int world;
  int accumulation;
  bool adamw;
  double max_grad_norm;  // 0 = no clipping
  double group_mb = 0;    // zero3's group_mb: 0 = every layer gathered alone
  double gather_mb = 1;   // zero3's staging per allgather round
};

std::string Name(const Case& c) {
  const std::string model = c.spec == kMlp ? "mlp" : c.spec == kGpt ? "gpt" : "tiny";
  std::string groups = c.group_mb > 0 ? absl::StrCat("_group", c.group_mb * 1e4) : "";
  if (c.gather_mb != 1) absl::StrAppend(&groups, "_rounds");
  return absl::StrCat(model, "_w", c.world, "_k", c.accumulation, c.adamw ? "_adamw" : "_sgd",
                      c.max_grad_norm > 0 ? "_clip" : "", groups);
}
std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return Name(info.param); }
void PrintTo(const Case& c, std::ostream* os) { *os << Name(c); }

struct RankRun {
  kernels::CpuBackend backend;
  std::unique_ptr<nn::Model> model;
  CommGroups groups;
  std::unique_ptr<GradientSync> sync;
  ~RankRun() {
    if (model != nullptr) model->set_param_hook(nullptr);
  }
};

absl::Status SetUpRank(const std::string& spec, const std::string& strategy, bool adamw,
                       double max_grad_norm, int micro_batch, Communicator& comm, RankRun* run,
                       std::map<std::string, std::string> opts = {}) {
  nn::ModelOptions mo;
  mo.max_batch = micro_batch;
  mo.seed = 7;
  ASSIGN_OR_RETURN(run->model, nn::CreateModel(spec, &run->backend, mo));
  run->groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
  SyncOptions so;
  so.strategy = strategy;
  so.bucket_cap_mb = kBucketCapMb;
  so.max_grad_norm = max_grad_norm;
  so.opts = std::move(opts);
  SyncEnv env;
  env.comms = &run->groups;
  env.params = run->model->storage().params();
  env.grads = run->model->storage().grads();
  env.size = run->model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(run->model->layout())) {
    env.ready_ranges.push_back({r.lo, r.hi});
  }
  env.layer_ranges = run->model->param_hook_ranges();
  env.make_optimizer = [adamw](optim::ParamRange r) { return MakeTestOptimizer(adamw, r); };
  ASSIGN_OR_RETURN(run->sync, CreateGradientSync(so, std::move(env)));
  run->model->set_param_hook(run->sync->param_hook());  // what the worker does
  return absl::OkStatus();
}

// Steps [first_step, last_step]; step s uses this rank's kPerRankBatch
// samples of the global batch starting at first_sample + (s - first) * world * b.
// `poison_step`: that step's first reported gradient range gets a NaN on
// rank 0 (the non-finite skip).
absl::Status Train(RankRun& run, const Data& data, int accumulation, bool adamw, int first_step,
                   int last_step, int first_sample, bool skip_non_finite = false,
                   int poison_step = -1) {
  const int world = run.groups.world->world_size();
  const int rank = run.groups.world->rank();
  const int micro = kPerRankBatch / accumulation;
  int step = 0;
  bool poisoned = false;
  const nn::GradReadyCallback on_ready = [&](const nn::GradRange& r) {
    if (step == poison_step && rank == 0 && !poisoned) {
      run.model->storage().grads()[r.lo] = std::nanf("");
      poisoned = true;
    }
    run.sync->OnGradientsReady(r.lo, r.hi);
  };
  for (step = first_step; step <= last_step; ++step) {
    const int first =
        first_sample + (step - first_step) * world * kPerRankBatch + rank * kPerRankBatch;
    RETURN_IF_ERROR(run.sync->BeforeForward());
    for (int m = 0; m < accumulation; ++m) {
      RETURN_IF_ERROR(run.model->Forward(data.Slice(first + m * micro, micro)));
      const float beta = m == 0 ? 0.f : 1.f;
      if (m + 1 < accumulation) {
        RETURN_IF_ERROR(run.model->Backward(beta, nullptr));
      } else {
        StepOptions so;
        so.grad_scale = 1.f / accumulation;
        so.skip_non_finite = skip_non_finite;
        RETURN_IF_ERROR(run.sync->BeginStep(so));
        RETURN_IF_ERROR(run.model->Backward(beta, on_ready));
      }
    }
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = adamw ? 1e-2f : 0.1f;
    RETURN_IF_ERROR(run.sync->FinishStep(ctx));
  }
  return absl::OkStatus();
}

// The whole parameter vector (collective under zero3: gathered and released).
absl::StatusOr<std::vector<float>> Params(RankRun& run) {
  const tensor::FlatStorage& s = run.model->storage();
  tensor::ParamHook* hook = run.sync->param_hook();
  if (hook != nullptr) RETURN_IF_ERROR(hook->Gather(0, s.size(), tensor::ParamPass::kForward));
  std::vector<float> p(s.params(), s.params() + s.size());
  if (hook != nullptr) hook->Release(0, s.size(), tensor::ParamPass::kForward);
  return p;
}

constexpr int kSteps = 5;

struct RankResult {
  std::vector<float> params;
  SyncMemory memory;
  int64_t peak_held = 0;
  int64_t held_after = -1;
};

std::vector<RankResult> RunStrategy(const Case& c, const std::string& strategy,
                                    const Data& data) {
  std::vector<RankResult> out(c.world);
  auto results =
      comm_testing::RunGlooRanks(c.world, [&](int rank, Communicator& comm) -> absl::Status {
        RankRun run;
        std::map<std::string, std::string> opts;
        if (strategy == "zero3") {
          opts = {{"group_mb", absl::StrCat(c.group_mb)}, {"gather_mb", absl::StrCat(c.gather_mb)}};
        }
        RETURN_IF_ERROR(SetUpRank(c.spec, strategy, c.adamw, c.max_grad_norm,
                                  kPerRankBatch / c.accumulation, comm, &run, opts));
        RETURN_IF_ERROR(Train(run, data, c.accumulation, c.adamw, 1, kSteps, 0));
        out[rank].memory = run.sync->memory();
        if (auto* z = dynamic_cast<Zero3Sync*>(run.sync.get())) {
          out[rank].peak_held = z->peak_held_param_floats();
          out[rank].held_after = z->held_param_floats();
        }
        ASSIGN_OR_RETURN(out[rank].params, Params(run));
        return absl::OkStatus();
      });
  for (int r = 0; r < c.world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
  return out;
}

class Zero3Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Zero3Equivalence, EndsEqualToAllreduceHoldingAtMostTwoLayers) {
  const Case c = GetParam();
  const Data data =
      MakeSyntheticData(*nn::ParseModelSpec(c.spec), kSteps * c.world * kPerRankBatch);
  std::vector<float> initial;
  std::vector<std::pair<int64_t, int64_t>> layers;
  {
    kernels::CpuBackend backend;
    nn::ModelOptions mo;
    mo.seed = 7;
    auto m = nn::CreateModel(c.spec, &backend, mo);
    ASSERT_TRUE(m.ok()) << m.status();
    initial.assign((*m)->storage().params(), (*m)->storage().params() + (*m)->storage().size());
    // What zero3 gathers as one: the layers grouped by group_mb.
    const int64_t min_floats = static_cast<int64_t>(c.group_mb * 1024 * 1024 / 4);
    layers = GroupLayers((*m)->param_hook_ranges(), c.group_mb > 0 ? std::max<int64_t>(1, min_floats) : 0)
                 .ranges();
  }
  const auto reference = RunStrategy(c, "allreduce", data);
  const auto zero = RunStrategy(c, "zero3", data);
  ASSERT_FALSE(reference[0].params.empty());
  ASSERT_FALSE(zero[0].params.empty());
  const double moved = RelativeDifference(reference[0].params, initial);
  const double diff = RelativeDifference(zero[0].params, reference[0].params);
  std::printf("%s: relative difference to allreduce %.3g (parameters moved %.3g)\n",
              Name(c).c_str(), diff, moved);
  ASSERT_GT(moved, 1e-4) << "training must move the parameters for the comparison to mean much";
  EXPECT_LE(diff, 1e-5);
  for (int r = 1; r < c.world; ++r) EXPECT_EQ(zero[r].params, zero[0].params) << "rank " << r;

  // Memory: parameters 1/N + at most two groups of layers (exactly the
  // largest pair of neighbouring groups in forward order, minus what the
  // rank owns: the current group and the prefetched next one); gradients
  // and optimizer state 1/N.
  const int64_t n = initial.size();
  const shard::ZeroShardMap map(n, c.world);
  const int64_t shard = map.shard_size();
  std::vector<int64_t> sizes;
  for (const auto& [lo, hi] : layers) sizes.push_back(hi - lo);
  std::sort(sizes.rbegin(), sizes.rend());
  const int64_t two_largest = sizes[0] + (sizes.size() > 1 ? sizes[1] : 0);
  const int64_t buffers = c.adamw ? 2 : 1;
  int64_t total_optimizer = 0;
  for (int r = 0; r < c.world; ++r) {
    const SyncMemory& m = zero[r].memory;
    EXPECT_LE(m.param_bytes, (shard + two_largest) * 4) << "rank " << r;
    const optim::ParamRange own = map.owned(r);
    int64_t pair = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
      auto non_owned = [&](size_t j) {
        const int64_t lo = std::max(layers[j].first, own.lo);
        const int64_t hi = std::min(layers[j].second, own.hi);
        return (layers[j].second - layers[j].first) - std::max<int64_t>(0, hi - lo);
      };
      pair = std::max(pair, non_owned(i) + (i + 1 < layers.size() ? non_owned(i + 1) : 0));
    }
    EXPECT_EQ(zero[r].peak_held, pair) << "rank " << r << ": the next layer is prefetched";
    EXPECT_EQ(m.param_bytes, (own.size() + pair) * 4) << "rank " << r;
    EXPECT_EQ(zero[r].held_after, 0) << "rank " << r << ": everything released after the step";
    EXPECT_EQ(m.grad_bytes, shard * 4) << "rank " << r;
    EXPECT_LE(m.optimizer_bytes, buffers * shard * 4);
    total_optimizer += m.optimizer_bytes;
  }
  EXPECT_EQ(total_optimizer, buffers * n * 4) << "the shards' state covers the vector once";
}

INSTANTIATE_TEST_SUITE_P(Mlp, Zero3Equivalence,
                         ::testing::Values(Case{kMlp, 1, 1, true, 0}, Case{kMlp, 2, 1, false, 0},
                                           Case{kMlp, 4, 2, false, 0},
                                           Case{kMlp, 2, 2, true, 0.05},
                                           Case{kMlp, 4, 1, true, 0},
                                           Case{kMlp, 4, 1, false, 0.05}),
                         CaseName);

INSTANTIATE_TEST_SUITE_P(Gpt, Zero3Equivalence,
                         ::testing::Values(Case{kGpt, 1, 1, false, 0},
                                           Case{kGpt, 2, 1, true, 0.05},
                                           Case{kGpt, 4, 2, false, 0},
                                           Case{kGpt, 4, 1, true, 0}),
                         CaseName);

// Layers gathered in groups (group_mb): 0.002 MiB (524 floats) makes the
// MLP two groups, [L1] and [L2 L3] (the short last layer joins), and the GPT
// several; 1 MiB is the whole model in one group (kept from forward into
// backward). gather_mb 0.0005 (131 floats of staging): the allgather goes
// in rounds of 32 or 65 floats per piece.
INSTANTIATE_TEST_SUITE_P(Groups, Zero3Equivalence,
                         ::testing::Values(Case{kMlp, 4, 1, true, 0, 0.002},
                                           Case{kMlp, 4, 1, false, 0.05, 1},
                                           Case{kMlp, 2, 1, true, 0, 1, 0.0005},
                                           Case{kMlp, 4, 2, false, 0, 0.002, 0.0005},
                                           Case{kGpt, 4, 1, true, 0, 0.002},
                                           Case{kGpt, 2, 1, false, 0.05, 1, 0.0005}),
                         CaseName);

INSTANTIATE_TEST_SUITE_P(MoreRanksThanLayers, Zero3Equivalence,
                         ::testing::Values(Case{kTiny, 4, 1, true, 0},
                                           Case{kTiny, 4, 1, false, 0.05}),
                         CaseName);

// release=now: resident memory really drops: the model's n-float buffer
// keeps about the owned quarter resident (plus pages shared at layer
// edges), before and after a step. (The equivalence cases above run the
// default release=lazy, whose released pages keep stale values: the
// results must not depend on what a released page holds.)
// Whether mincore(2) answers on this host (some sandboxes refuse it).
bool MincoreWorks() {
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<char> buffer(3 * page, 1);
  const uintptr_t a = (reinterpret_cast<uintptr_t>(buffer.data()) + page - 1) / page * page;
  unsigned char v = 0;
  return mincore(reinterpret_cast<void*>(a), page, &v) == 0;
}

TEST(Zero3Memory, ReleasedPagesLeaveResidentMemory) {
  if (!MincoreWorks()) GTEST_SKIP() << "mincore(2) is unavailable here: resident pages unmeasurable";
  constexpr char kWide[] = "mlp:64,256,256,256,10";  // ~150k parameters, 600 KB
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kWide), 4 * kPerRankBatch);
  auto results = comm_testing::RunGlooRanks(4, [&](int, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(kWide, "zero3", false, 0, kPerRankBatch, comm, &run,
                              {{"release", "now"}}));
    auto* z = dynamic_cast<Zero3Sync*>(run.sync.get());
    if (z == nullptr) return absl::InternalError("not a Zero3Sync");
    const int64_t n = run.model->storage().size();
    const int64_t owned = z->owned_range().size() * 4;
    const int64_t slack = int64_t{2 * 4096} * (run.model->param_hook_ranges().size() + 2);
    const int64_t before = z->resident_param_bytes();
    RETURN_IF_ERROR(Train(run, data, 1, false, 1, 1, 0));
    const int64_t after = z->resident_param_bytes();
    std::printf("resident parameter bytes: %lld of %lld before, %lld after a step\n",
                static_cast<long long>(before), static_cast<long long>(n * 4),
                static_cast<long long>(after));
    if (before < 0 || after < 0) {
      return absl::InternalError("resident_param_bytes failed although mincore works here");
    }
    if (before > owned + slack || after > owned + slack) {
      return absl::InternalError(absl::StrCat("resident ", before, " / ", after,
                                              " bytes, want <= ", owned + slack));
    }
    // And the gathered view is still whole and correct.
    ASSIGN_OR_RETURN(std::vector<float> p, Params(run));
    for (float v : p) {
      if (!std::isfinite(v)) return absl::InternalError("a gathered parameter is not finite");
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

// skip_non_finite: one NaN on rank 0 skips the step on every rank, leaves
// the parameters untouched and names the range; the next step applies.
TEST(Zero3NonFinite, NanOnOneRankSkipsTheStepEverywhere) {
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kMlp), 3 * 2 * kPerRankBatch);
  std::vector<std::vector<float>> before(2), after(2), later(2);
  std::vector<StepReport> report(2);
  auto results = comm_testing::RunGlooRanks(2, [&](int rank, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(kMlp, "zero3", true, 0, kPerRankBatch, comm, &run));
    RETURN_IF_ERROR(Train(run, data, 1, true, 1, 1, 0, true));
    ASSIGN_OR_RETURN(before[rank], Params(run));
    RETURN_IF_ERROR(Train(run, data, 1, true, 2, 2, 2 * kPerRankBatch, true, /*poison=*/2));
    report[rank] = run.sync->last_step();
    ASSIGN_OR_RETURN(after[rank], Params(run));
    RETURN_IF_ERROR(Train(run, data, 1, true, 3, 3, 4 * kPerRankBatch, true));
    ASSIGN_OR_RETURN(later[rank], Params(run));
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(report[r].applied) << "rank " << r;
    EXPECT_EQ(report[r].first_non_finite_range, 0) << "rank " << r;
    EXPECT_EQ(after[r], before[r]) << "rank " << r << ": a skipped step changes nothing";
    EXPECT_NE(later[r], after[r]) << "rank " << r << ": the next step applies";
  }
}

TEST(Zero3Sync, GatherOutsideTheParametersIsRefused) {
  auto results = comm_testing::RunGlooRanks(1, [&](int, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(kMlp, "zero3", false, 0, kPerRankBatch, comm, &run));
    const int64_t n = run.model->storage().size();
    absl::Status s = run.sync->param_hook()->Gather(0, n + 1, tensor::ParamPass::kForward);
    if (s.code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError(absl::StrCat("want InvalidArgument, got ", s.ToString()));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(results[0].ok()) << results[0];
}

// ---- Checkpoints: the zero1/2 shard files + manifest ----

std::string TestDir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

// What services/worker/checkpointer.cc does (sync_testing::SaveShards,
// LoadWhole; zero3 keeps its master slice in the model's buffer).
absl::Status Save(RankRun& run, const std::string& dir, int64_t step) {
  return sync_testing::SaveShards(*run.model, *run.groups.world, *run.sync, dir, step);
}

absl::Status Load(RankRun& run, const std::string& manifest) {
  checkpoint::Checkpoint whole;
  return sync_testing::LoadWhole(*run.model, *run.sync, manifest, &whole);
}

struct Resumed {
  std::vector<float> loaded;  // rank 0's gathered parameters right after the load
  std::vector<float> final;   // after the K2 further steps
};

// K1 steps under (save, save_world), saved; then loaded under (load,
// load_world), which must gather the saved parameters and optimizer state
// exactly, and trained K2 more steps.
Resumed SaveAndResume(const std::string& save, int save_world, const std::string& load,
                      int load_world, const std::string& dir, const Data& data, int k1, int k2) {
  auto saved = comm_testing::RunGlooRanks(save_world, [&](int, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(kMlp, save, true, 0.05, kPerRankBatch, comm, &run));
    RETURN_IF_ERROR(Train(run, data, 1, true, 1, k1, 0));
    return Save(run, dir, k1);
  });
  for (const absl::Status& s : saved) EXPECT_TRUE(s.ok()) << s;
  checkpoint::ReadOptions ro;
  ro.expected_model_fingerprint = 99;
  absl::StatusOr<checkpoint::Checkpoint> on_disk =
      checkpoint::ReadWholeCheckpoint(checkpoint::ManifestPath(dir, k1), ro);
  EXPECT_TRUE(on_disk.ok()) << on_disk.status();
  if (!on_disk.ok()) return {};
  Resumed out;
  std::vector<std::vector<float>> gathered(on_disk->optimizer_state.size(),
                                           std::vector<float>(on_disk->total_params, -1.f));
  auto resumed =
      comm_testing::RunGlooRanks(load_world, [&](int rank, Communicator& comm) -> absl::Status {
        RankRun run;
        RETURN_IF_ERROR(SetUpRank(kMlp, load, true, 0.05, kPerRankBatch, comm, &run));
        RETURN_IF_ERROR(Load(run, checkpoint::ManifestPath(dir, k1)));
        const optim::ParamRange o = run.sync->owned_range();
        std::vector<optim::StateBuffer> state = run.sync->optimizer()->state();
        for (size_t b = 0; b < state.size(); ++b) {
          std::copy(state[b].data.begin(), state[b].data.end(), gathered[b].begin() + o.lo);
        }
        ASSIGN_OR_RETURN(std::vector<float> p, Params(run));
        if (rank == 0) out.loaded = std::move(p);
        RETURN_IF_ERROR(comm.Barrier());
        RETURN_IF_ERROR(
            Train(run, data, 1, true, k1 + 1, k1 + k2, k1 * save_world * kPerRankBatch));
        ASSIGN_OR_RETURN(p, Params(run));
        if (rank == 0) out.final = std::move(p);
        return absl::OkStatus();
      });
  for (const absl::Status& s : resumed) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(out.loaded, on_disk->params) << "the gathered state equals the saved one";
  for (size_t b = 0; b < gathered.size(); ++b) {
    EXPECT_EQ(gathered[b], on_disk->optimizer_state[b].second)
        << "optimizer buffer " << on_disk->optimizer_state[b].first
        << " gathered over the new ranks differs from the saved one";
  }
  return out;
}

TEST(Zero3Checkpoint, SavedAtFourResumesAtTwoAndIntoAllreduce) {
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kMlp), 8 * 4 * kPerRankBatch);
  const Resumed z3 = SaveAndResume("zero3", 4, "zero3", 2, TestDir("z3_4_to_2"), data, 3, 2);
  const Resumed to_ar =
      SaveAndResume("zero3", 4, "allreduce", 2, TestDir("z3_4_to_ar2"), data, 3, 2);
  const Resumed from_ar =
      SaveAndResume("allreduce", 4, "zero3", 2, TestDir("ar4_to_z3_2"), data, 3, 2);
  const Resumed reference =
      SaveAndResume("allreduce", 4, "allreduce", 2, TestDir("ar4_to_ar2"), data, 3, 2);
  ASSERT_FALSE(reference.final.empty());
  EXPECT_LE(RelativeDifference(z3.final, reference.final), 1e-5);
  EXPECT_LE(RelativeDifference(to_ar.final, reference.final), 1e-5);
  EXPECT_LE(RelativeDifference(from_ar.final, reference.final), 1e-5);
  EXPECT_LE(RelativeDifference(z3.loaded, reference.loaded), 1e-5);
}

TEST(Zero3Registry, RegisteredWithItsKeys) {
  absl::StatusOr<StrategyInfo> info = FindStrategy("zero3");
  ASSERT_TRUE(info.ok()) << info.status();
  absl::StatusOr<SyncOptions> o = ParseSyncOptions("zero3", "nonsense=1");
  ASSERT_TRUE(o.ok());
  absl::Status s = ValidateSyncOptions(*o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bucket_cap_mb"), std::string::npos) << s;
  for (const char* good : {"release=lazy", "release=now", "release=keep"}) {
    absl::StatusOr<SyncOptions> g = ParseSyncOptions("zero3", good);
    ASSERT_TRUE(g.ok()) << good;
    EXPECT_TRUE(ValidateSyncOptions(*g).ok()) << good;
  }
  absl::StatusOr<SyncOptions> bad = ParseSyncOptions("zero3", "release=sometimes");
  ASSERT_TRUE(bad.ok());
  s = ValidateSyncOptions(*bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("lazy"), std::string::npos) << s;
  EXPECT_NE(s.message().find("sometimes"), std::string::npos) << s;
}

TEST(Zero3Registry, GroupOptionsAreCheckedWithClearMessages) {
  for (const char* good : {"group_mb=0", "group_mb=64", "gather_mb=0.5", "group_mb=2,gather_mb=8"}) {
    absl::StatusOr<SyncOptions> g = ParseSyncOptions("zero3", good);
    ASSERT_TRUE(g.ok()) << good;
    EXPECT_TRUE(ValidateSyncOptions(*g).ok()) << good;
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"group_mb=-1", "group_mb must be between 0"},
      {"group_mb=nan", "group_mb"},
      {"group_mb=lots", "group_mb"},
      {"gather_mb=0", "gather_mb must be > 0"},
      {"gather_mb=-2", "gather_mb must be > 0"}};
  for (const auto& [opt, want] : bad) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("zero3", opt);
    const absl::Status s = o.ok() ? ValidateSyncOptions(*o) : o.status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << opt;
    EXPECT_NE(s.message().find(want), std::string::npos) << opt << ": " << s;
  }
  // Options built directly (not through the registry) are checked too.
  Zero3SyncOptions direct;
  direct.group_mb = -3;
  EXPECT_NE(CheckZero3GroupOptions(direct.group_mb, direct.gather_mb).message().find("-3"),
            std::string::npos);
}

}  // namespace
}  // namespace sync
}  // namespace tandem
