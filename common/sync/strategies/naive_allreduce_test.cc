// The strategy seam: "naive_allreduce" (this package, no buckets, no
// overlap) and "allreduce" (several buckets overlapped with "backward"),
// both built through the registry on 2 Gloo ranks (a thread each), end with
// bit-identical parameters after several AdamW steps with clipping and
// gradient scaling, for 1 and 3 chunks. Also: chunks validation and a step
// whose ranges do not cover the vector.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/adamw.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int kWorld = 2;
constexpr int kSteps = 4;
constexpr int64_t kSize = 1000;
// Backward order, descending, uneven.
const std::vector<std::pair<int64_t, int64_t>> kRanges = {
    {900, 1000}, {640, 900}, {600, 640}, {250, 600}, {0, 250}};

SyncEnv MakeEnv(CommGroups* groups, std::vector<float>& params, std::vector<float>& grads) {
  SyncEnv env;
  env.comms = groups;
  env.params = params.data();
  env.grads = grads.data();
  env.size = static_cast<int64_t>(params.size());
  env.ready_ranges = kRanges;
  env.make_optimizer =
      [](optim::ParamRange r) -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    optim::AdamWOptions o;
    o.weight_decay = 0.01f;
    ASSIGN_OR_RETURN(std::unique_ptr<optim::AdamW> adamw, optim::AdamW::Create(r, o));
    return std::unique_ptr<optim::Optimizer>(std::move(adamw));
  };
  return env;
}

// Trains kSteps on synthetic per-rank gradients; returns the parameters.
absl::Status Train(const std::string& strategy, const std::string& sync_opt, int rank,
                   Communicator& comm, std::vector<float>* out, SyncStats* stats) {
  CommGroups groups;
  groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
  std::vector<float> params(kSize), grads(kSize);
  for (int64_t i = 0; i < kSize; ++i) params[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  ASSIGN_OR_RETURN(SyncOptions options, ParseSyncOptions(strategy, sync_opt));
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync,
                   CreateGradientSync(options, MakeEnv(&groups, params, grads)));
  for (int step = 1; step <= kSteps; ++step) {
    for (int64_t i = 0; i < kSize; ++i) {
      grads[i] = 3.f * std::sin(0.37f * static_cast<float>(i) + 1.3f * rank + 0.7f * step);
    }
    StepOptions so;
    so.grad_scale = 0.5f;
    RETURN_IF_ERROR(sync->BeginStep(so));
    for (const auto& [lo, hi] : kRanges) sync->OnGradientsReady(lo, hi);
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = 0.01f;
    RETURN_IF_ERROR(sync->FinishStep(ctx));
  }
  *out = params;
  *stats = sync->stats();
  return absl::OkStatus();
}

struct TrainingRun {
  std::vector<std::vector<float>> params = std::vector<std::vector<float>>(kWorld);
  std::vector<SyncStats> stats = std::vector<SyncStats>(kWorld);
};

TrainingRun TrainAll(const std::string& strategy, const std::string& sync_opt) {
  TrainingRun run;
  auto results = comm_testing::RunGlooRanks(kWorld, [&](int rank, Communicator& comm) {
    return Train(strategy, sync_opt, rank, comm, &run.params[rank], &run.stats[rank]);
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(results[r].ok()) << strategy << ": " << results[r];
  return run;
}

TEST(NaiveAllreduce, SameParametersAsAllreduceBitForBit) {
  // 0.0005 MiB = 131 floats: several allreduce buckets per step.
  const TrainingRun reference = TrainAll("allreduce", "bucket_cap_mb=0.0005,max_grad_norm=5");
  ASSERT_EQ(reference.params[0].size(), static_cast<size_t>(kSize));
  EXPECT_GT(reference.stats[0].buckets / kSteps, 1);
  EXPECT_EQ(reference.params[1], reference.params[0]);
  // Training moved the parameters, and clipping was active (the gradient
  // norm is ~sqrt(1000 * 4.5) / 2, far above 5).
  int moved = 0;
  for (int64_t i = 0; i < kSize; ++i) {
    moved += reference.params[0][i] != 0.01f * static_cast<float>(i % 17) - 0.08f;
  }
  EXPECT_GT(moved, kSize / 2);

  for (const char* opt : {"max_grad_norm=5", "chunks=3,max_grad_norm=5"}) {
    const TrainingRun naive = TrainAll("naive_allreduce", opt);
    ASSERT_EQ(naive.params[0].size(), static_cast<size_t>(kSize)) << opt;
    EXPECT_EQ(naive.params[0], reference.params[0]) << opt;
    EXPECT_EQ(naive.params[1], reference.params[0]) << opt;
    EXPECT_EQ(naive.stats[0].steps, kSteps);
    EXPECT_EQ(naive.stats[0].bytes_sent, reference.stats[0].bytes_sent);
  }
  const TrainingRun three = TrainAll("naive_allreduce", "chunks=3");
  EXPECT_EQ(three.stats[0].buckets, 3 * kSteps);
  EXPECT_NE(three.params[0], reference.params[0]) << "without clipping the result must differ";
}

TEST(NaiveAllreduce, ChunksIsValidated) {
  for (const char* bad : {"chunks=0", "chunks=-2", "chunks=many"}) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("naive_allreduce", bad);
    ASSERT_TRUE(o.ok()) << bad;
    absl::Status s = ValidateSyncOptions(*o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("chunks"), std::string::npos) << s;
  }
  absl::StatusOr<SyncOptions> o = ParseSyncOptions("naive_allreduce", "bucket_count=2");
  ASSERT_TRUE(o.ok());
  EXPECT_NE(ValidateSyncOptions(*o).message().find(
                "valid keys are chunks (pieces the allreduce is split into, >= 1, default 1)"),
            std::string::npos)
      << ValidateSyncOptions(*o);
  o = ParseSyncOptions("naive_allreduce", "chunks=7");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(ValidateSyncOptions(*o).ok());
}

TEST(NaiveAllreduce, MissingRangesAreAnErrorAndNothingIsApplied) {
  std::vector<std::vector<float>> before(kWorld), after(kWorld);
  std::vector<absl::Status> finish(kWorld);
  auto results = comm_testing::RunGlooRanks(kWorld, [&](int rank, Communicator& comm) -> absl::Status {
    CommGroups groups;
    groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
    std::vector<float> params(kSize, 1.f), grads(kSize, 1.f);
    ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync,
                     CreateGradientSync(*ParseSyncOptions("naive_allreduce", ""),
                                        MakeEnv(&groups, params, grads)));
    before[rank] = params;
    RETURN_IF_ERROR(sync->BeginStep({}));
    sync->OnGradientsReady(900, 1000);  // the rest never reported
    optim::StepContext ctx;
    ctx.lr = 0.1f;
    finish[rank] = sync->FinishStep(ctx);
    after[rank] = params;
    return absl::OkStatus();
  });
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(finish[r].code(), absl::StatusCode::kFailedPrecondition) << finish[r];
    EXPECT_NE(finish[r].message().find("100 of 1000"), std::string::npos) << finish[r];
    EXPECT_EQ(after[r], before[r]);
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
