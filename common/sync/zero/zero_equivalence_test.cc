// The ZeRO checks, on N Gloo ranks (a thread each, one in-memory
// store): zero1 and zero2, built through the registry, end within 1e-5 of
// the allreduce strategy at the same N after K steps, for SGD with momentum
// and AdamW, with gradient accumulation and with clipping, on an MLP (its 3
// layers < N = 4, and 1285 parameters, which 4 does not divide), a small GPT
// and a 6-parameter model whose last rank owns nothing. Also: optimizer and
// gradient bytes per rank; a checkpoint written as shards at N = 4 and
// resumed at N = 3 (the gathered optimizer state equals the saved one
// exactly, and training continues as if uninterrupted), at N = 4 (bit-
// identical to an uninterrupted run), and zero2 -> allreduce.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/comm/groups.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/io/file.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/sync/registry.h"
#include "common/sync/testing/shard_checkpoint.h"
#include "common/sync/testing/synthetic_training.h"
#include "common/sync/zero/zero_sync.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Data = sync_testing::SyntheticData;
using sync_testing::MakeSyntheticData;
using sync_testing::MakeTestOptimizer;
using sync_testing::RelativeDifference;
using sync_testing::TestStepContext;

constexpr int kPerRankBatch = 8;
constexpr double kBucketCapMb = 0.002;  // ~500 floats: several buckets and gather rounds

constexpr char kMlp[] = "mlp:20,32,16,5";
constexpr char kGpt[] = "gpt:layers=1,heads=2,width=16,context=8,vocab=32";
constexpr char kTiny[] = "mlp:2,2";  // 6 parameters

struct Case {
  std::string spec;
  std::string strategy;  // "zero1" / "zero2"
  int world;
  int accumulation;
  bool adamw;
  double max_grad_norm;  // 0 = no clipping
};

std::string Name(const Case& c) {
  const std::string model = c.spec == kMlp ? "mlp" : c.spec == kGpt ? "gpt" : "tiny";
  return absl::StrCat(model, "_", absl::StrReplaceAll(c.strategy, {{"+", "_"}}), "_w", c.world, "_k", c.accumulation,
                      c.adamw ? "_adamw" : "_sgd", c.max_grad_norm > 0 ? "_clip" : "");
}
std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return Name(info.param); }
void PrintTo(const Case& c, std::ostream* os) { *os << Name(c); }

// One rank's model and strategy ("allreduce", "zero1", "zero2" through the
// registry).
struct RankRun {
  kernels::CpuBackend backend;
  std::unique_ptr<nn::Model> model;
  CommGroups groups;
  std::unique_ptr<GradientSync> sync;
};

absl::Status SetUpRank(const std::string& spec, const std::string& strategy, bool adamw,
                   double max_grad_norm, int micro_batch, Communicator& comm, RankRun* run) {
  nn::ModelOptions mo;
  mo.max_batch = micro_batch;
  mo.seed = 7;
  ASSIGN_OR_RETURN(run->model, nn::CreateModel(spec, &run->backend, mo));
  run->groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
  // "zero2+overlap": the slices gathered during the next forward through
  // the model's parameter hook, as the worker installs it.
  const bool overlap = absl::EndsWith(strategy, "+overlap");
  SyncOptions so;
  so.strategy = overlap ? strategy.substr(0, strategy.size() - 8) : strategy;
  // Without the suffix a ZeRO strategy allgathers at the end of the step.
  if (absl::StartsWith(so.strategy, "zero")) so.opts["overlap"] = overlap ? "1" : "0";
  so.bucket_cap_mb = kBucketCapMb;
  so.max_grad_norm = max_grad_norm;
  SyncEnv env;
  env.comms = &run->groups;
  env.params = run->model->storage().params();
  env.grads = run->model->storage().grads();
  env.size = run->model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(run->model->layout())) {
    env.ready_ranges.push_back({r.lo, r.hi});
  }
  if (overlap) env.layer_ranges = run->model->param_hook_ranges();
  env.make_optimizer = [adamw](optim::ParamRange r) { return MakeTestOptimizer(adamw, r); };
  ASSIGN_OR_RETURN(run->sync, CreateGradientSync(so, std::move(env)));
  if (overlap) {
    tensor::ParamHook* hook = run->sync->param_hook();
    if ((hook == nullptr) != (comm.world_size() == 1)) {
      return absl::InternalError("overlap: a hook exactly when there are several ranks");
    }
    run->model->set_param_hook(hook);
  }
  return absl::OkStatus();
}

// The whole vector as every rank must hold it after the last step (what
// the worker's LeaveParametersWhole does): waits for an overlapped gather.
absl::Status GatherWhole(RankRun& run) {
  tensor::ParamHook* hook = run.sync->param_hook();
  if (hook == nullptr) return absl::OkStatus();
  return hook->Gather(0, run.model->storage().size(), tensor::ParamPass::kForward);
}

// Steps [first_step, last_step]; step s uses the global batch that starts at
// sample offsets[s - 1] (world * b samples; this rank's b of them).
absl::Status Train(RankRun& run, const Data& data, int accumulation, bool adamw, int first_step,
                   int last_step, int first_sample) {
  const int world = run.groups.world->world_size();
  const int rank = run.groups.world->rank();
  const int micro = kPerRankBatch / accumulation;
  const nn::GradReadyCallback on_ready = [&run](const nn::GradRange& r) {
    run.sync->OnGradientsReady(r.lo, r.hi);
  };
  for (int step = first_step; step <= last_step; ++step) {
    const int first =
        first_sample + (step - first_step) * world * kPerRankBatch + rank * kPerRankBatch;
    for (int m = 0; m < accumulation; ++m) {
      RETURN_IF_ERROR(run.model->Forward(data.Slice(first + m * micro, micro)));
      const float beta = m == 0 ? 0.f : 1.f;
      if (m + 1 < accumulation) {
        RETURN_IF_ERROR(run.model->Backward(beta, nullptr));
      } else {
        StepOptions so;
        so.grad_scale = 1.f / accumulation;
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

std::vector<float> Params(RankRun& run) {
  const tensor::FlatStorage& s = run.model->storage();
  return std::vector<float>(s.params(), s.params() + s.size());
}

constexpr int kSteps = 5;

// Runs `strategy` on c.world ranks for kSteps; returns every rank's params.
std::vector<std::vector<float>> RunStrategy(const Case& c, const std::string& strategy,
                                            const Data& data,
                                            std::vector<ZeroMemory>* memory = nullptr) {
  std::vector<std::vector<float>> params(c.world);
  if (memory != nullptr) memory->assign(c.world, ZeroMemory());
  auto results = comm_testing::RunGlooRanks(c.world, [&](int rank, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(c.spec, strategy, c.adamw, c.max_grad_norm,
                          kPerRankBatch / c.accumulation, comm, &run));
    RETURN_IF_ERROR(Train(run, data, c.accumulation, c.adamw, 1, kSteps, 0));
    RETURN_IF_ERROR(GatherWhole(run));
    params[rank] = Params(run);
    if (memory != nullptr) {
      auto* z = dynamic_cast<ZeroSync*>(run.sync.get());
      if (z == nullptr) return absl::InternalError("not a ZeroSync");
      (*memory)[rank] = z->memory();
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < c.world; ++r) EXPECT_TRUE(results[r].ok()) << results[r];
  return params;
}

class ZeroEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroEquivalence, EndsEqualToAllreduce) {
  const Case c = GetParam();
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(c.spec), kSteps * c.world * kPerRankBatch);
  std::vector<float> initial;
  {
    kernels::CpuBackend backend;
    nn::ModelOptions mo;
    mo.seed = 7;
    auto m = nn::CreateModel(c.spec, &backend, mo);
    ASSERT_TRUE(m.ok()) << m.status();
    initial.assign((*m)->storage().params(), (*m)->storage().params() + (*m)->storage().size());
  }
  const auto reference = RunStrategy(c, "allreduce", data);
  std::vector<ZeroMemory> memory;
  const auto zero = RunStrategy(c, c.strategy, data, &memory);
  ASSERT_FALSE(reference[0].empty());
  ASSERT_FALSE(zero[0].empty());
  const double moved = RelativeDifference(reference[0], initial);
  const double diff = RelativeDifference(zero[0], reference[0]);
  std::printf("%s: relative difference to allreduce %.3g (parameters moved %.3g)\n",
              Name(c).c_str(), diff, moved);
  ASSERT_GT(moved, 1e-4) << "training must move the parameters for the comparison to mean much";
  EXPECT_LE(diff, 1e-5);
  for (int r = 1; r < c.world; ++r) EXPECT_EQ(zero[r], zero[0]) << "rank " << r;

  // Memory: optimizer state is full/N (plus padding), zero2's reduced
  // gradients 1/N; parameters stay whole.
  const int64_t n = initial.size();
  const int64_t buffers = c.adamw ? 2 : 1;
  const double full_optimizer = static_cast<double>(buffers * n * 4);
  const int64_t shard = (n + c.world - 1) / c.world;
  int64_t total_optimizer = 0;
  for (int r = 0; r < c.world; ++r) {
    const ZeroMemory& m = memory[r];
    EXPECT_EQ(m.param_bytes, n * 4);
    EXPECT_LE(std::abs(m.optimizer_bytes - full_optimizer / c.world),
              0.01 * full_optimizer / c.world + buffers * 4 * c.world)
        << "rank " << r;
    EXPECT_LE(m.optimizer_bytes, buffers * shard * 4);
    total_optimizer += m.optimizer_bytes;
    EXPECT_EQ(m.grad_bytes, absl::StartsWith(c.strategy, "zero2") ? shard * 4 : n * 4)
        << "rank " << r;
  }
  EXPECT_EQ(total_optimizer, buffers * n * 4) << "the shards' state covers the vector once";
}

INSTANTIATE_TEST_SUITE_P(
    Mlp, ZeroEquivalence,
    ::testing::Values(Case{kMlp, "zero1", 1, 1, false, 0}, Case{kMlp, "zero2", 1, 1, true, 0},
                      Case{kMlp, "zero1", 2, 1, false, 0}, Case{kMlp, "zero2", 2, 1, false, 0},
                      Case{kMlp, "zero1", 4, 2, false, 0}, Case{kMlp, "zero2", 4, 2, false, 0},
                      Case{kMlp, "zero1", 2, 2, true, 0.05}, Case{kMlp, "zero2", 2, 2, true, 0.05},
                      Case{kMlp, "zero1", 4, 1, true, 0}, Case{kMlp, "zero2", 4, 1, true, 0},
                      Case{kMlp, "zero1", 4, 1, false, 0.05},
                      Case{kMlp, "zero2", 4, 1, false, 0.05}),
    CaseName);

INSTANTIATE_TEST_SUITE_P(Gpt, ZeroEquivalence,
                         ::testing::Values(Case{kGpt, "zero1", 2, 1, true, 0.05},
                                           Case{kGpt, "zero2", 2, 1, true, 0.05},
                                           Case{kGpt, "zero1", 4, 2, false, 0},
                                           Case{kGpt, "zero2", 4, 2, false, 0}),
                         CaseName);

// The updated slices gathered layer by layer during the next forward.
INSTANTIATE_TEST_SUITE_P(
    Overlap, ZeroEquivalence,
    ::testing::Values(Case{kMlp, "zero1+overlap", 1, 1, false, 0},
                      Case{kMlp, "zero1+overlap", 2, 1, false, 0},
                      Case{kMlp, "zero2+overlap", 4, 2, true, 0.05},
                      Case{kMlp, "zero2+overlap", 3, 1, false, 0},
                      Case{kGpt, "zero2+overlap", 2, 2, true, 0.05},
                      Case{kGpt, "zero1+overlap", 4, 1, false, 0},
                      Case{kTiny, "zero2+overlap", 4, 1, false, 0}),
    CaseName);

INSTANTIATE_TEST_SUITE_P(MoreRanksThanParameters, ZeroEquivalence,
                         ::testing::Values(Case{kTiny, "zero1", 4, 1, true, 0},
                                           Case{kTiny, "zero2", 4, 1, false, 0.05}),
                         CaseName);

// ---- Checkpoints: shards + manifest, resumed at another N or strategy ----

std::string TestDir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

// What services/worker/checkpointer.cc does (sync_testing::SaveShards,
// LoadWhole).
absl::Status Save(RankRun& run, const std::string& dir, int64_t step) {
  return sync_testing::SaveShards(*run.model, *run.groups.world, *run.sync, dir, step);
}

absl::Status Load(RankRun& run, const std::string& manifest, checkpoint::Checkpoint* whole) {
  return sync_testing::LoadWhole(*run.model, *run.sync, manifest, whole);
}

struct ResumeCase {
  std::string save_strategy;
  int save_world;
  std::string load_strategy;
  int load_world;
};

// Trains K1 steps under (save_strategy, save_world), saves, resumes under
// (load_strategy, load_world) for K2 steps; returns rank 0's params, and
// checks that the loaded optimizer state, gathered over the new ranks,
// equals the saved one bit for bit.
std::vector<float> SaveAndResume(const ResumeCase& rc, const std::string& dir, const Data& data,
                                 int k1, int k2) {
  auto saved = comm_testing::RunGlooRanks(rc.save_world, [&](int, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(kMlp, rc.save_strategy, true, 0.05, kPerRankBatch, comm, &run));
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

  std::vector<float> params;
  std::vector<std::vector<float>> gathered(on_disk->optimizer_state.size(),
                                           std::vector<float>(on_disk->total_params, -1.f));
  auto resumed = comm_testing::RunGlooRanks(rc.load_world, [&](int rank, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(kMlp, rc.load_strategy, true, 0.05, kPerRankBatch, comm, &run));
    checkpoint::Checkpoint whole;
    RETURN_IF_ERROR(Load(run, checkpoint::ManifestPath(dir, k1), &whole));
    const optim::ParamRange o = run.sync->owned_range();
    std::vector<optim::StateBuffer> state = run.sync->optimizer()->state();
    for (size_t b = 0; b < state.size(); ++b) {
      std::copy(state[b].data.begin(), state[b].data.end(), gathered[b].begin() + o.lo);
    }
    RETURN_IF_ERROR(comm.Barrier());
    RETURN_IF_ERROR(Train(run, data, 1, true, k1 + 1, k1 + k2, k1 * rc.save_world * kPerRankBatch));
    if (rank == 0) params = Params(run);
    return absl::OkStatus();
  });
  for (const absl::Status& s : resumed) EXPECT_TRUE(s.ok()) << s;
  for (size_t b = 0; b < gathered.size(); ++b) {
    EXPECT_EQ(gathered[b], on_disk->optimizer_state[b].second)
        << "optimizer buffer " << on_disk->optimizer_state[b].first
        << " gathered over the new ranks differs from the saved one";
  }
  return params;
}

// Uninterrupted: K1 steps at world1 then K2 at world2 under `strategy`,
// the model state handed over in memory.
std::vector<float> Uninterrupted(const std::string& strategy, int world1, int world2,
                                 const Data& data, int k1, int k2) {
  const ResumeCase rc{strategy, world1, strategy, world2};
  return SaveAndResume(rc, TestDir(absl::StrCat("uninterrupted_", strategy, world1, world2)),
                       data, k1, k2);
}

TEST(ZeroCheckpoint, ResumeAtTheSameWorldIsBitIdenticalToAnUninterruptedRun) {
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kMlp), 8 * 4 * kPerRankBatch);
  std::vector<float> straight;
  auto results = comm_testing::RunGlooRanks(4, [&](int rank, Communicator& comm) -> absl::Status {
    RankRun run;
    RETURN_IF_ERROR(SetUpRank(kMlp, "zero2", true, 0.05, kPerRankBatch, comm, &run));
    RETURN_IF_ERROR(Train(run, data, 1, true, 1, 6, 0));
    if (rank == 0) straight = Params(run);
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  const std::vector<float> resumed =
      SaveAndResume({"zero2", 4, "zero2", 4}, TestDir("same_world"), data, 3, 3);
  ASSERT_EQ(resumed.size(), straight.size());
  EXPECT_EQ(resumed, straight);
}

TEST(ZeroCheckpoint, SavedAtFourResumesAtThreeAndContinues) {
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kMlp), 8 * 4 * kPerRankBatch);
  // The reference hands the state over through the same files but keeps
  // the world: only the resharding differs.
  const std::vector<float> resharded =
      SaveAndResume({"zero1", 4, "zero1", 3}, TestDir("four_to_three"), data, 3, 3);
  // Same schedule of batches under allreduce (4 ranks for 3 steps, then 3).
  const std::vector<float> reference =
      SaveAndResume({"allreduce", 4, "allreduce", 3}, TestDir("ar_four_to_three"), data, 3, 3);
  ASSERT_FALSE(resharded.empty());
  ASSERT_EQ(resharded.size(), reference.size());
  EXPECT_LE(RelativeDifference(resharded, reference), 1e-5);
}

TEST(ZeroCheckpoint, Zero2CheckpointLoadsIntoAllreduceAndBack) {
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kMlp), 8 * 4 * kPerRankBatch);
  const std::vector<float> to_allreduce =
      SaveAndResume({"zero2", 4, "allreduce", 2}, TestDir("z2_to_ar"), data, 3, 2);
  const std::vector<float> to_zero2 =
      SaveAndResume({"allreduce", 4, "zero2", 2}, TestDir("ar_to_z2"), data, 3, 2);
  const std::vector<float> reference = Uninterrupted("allreduce", 4, 2, data, 3, 2);
  ASSERT_FALSE(reference.empty());
  EXPECT_LE(RelativeDifference(to_allreduce, reference), 1e-5);
  EXPECT_LE(RelativeDifference(to_zero2, reference), 1e-5);
}

// Bad input through the registry: an unknown key is refused with the list.
TEST(ZeroRegistry, StrategiesAreRegisteredWithTheirKeys) {
  for (const char* name : {"zero1", "zero2"}) {
    absl::StatusOr<StrategyInfo> info = FindStrategy(name);
    ASSERT_TRUE(info.ok()) << name;
    absl::StatusOr<SyncOptions> o = ParseSyncOptions(name, "nonsense=1");
    ASSERT_TRUE(o.ok());
    absl::Status s = ValidateSyncOptions(*o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find("bucket_cap_mb"), std::string::npos) << s;
    o = ParseSyncOptions(name, "overlap=2");
    ASSERT_TRUE(o.ok());
    s = ValidateSyncOptions(*o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find("overlap must be 1"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
