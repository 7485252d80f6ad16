// The headline check: with a fixed seed, N ranks (a thread each,
// Gloo over an in-memory store) at per-rank batch b, synchronised by
// AllreduceSync, end with the same parameters as one process at batch N*b
// after K steps, with and without gradient accumulation (k micro-batches of
// b/k), for SGD with momentum and AdamW, on an MLP and a small GPT. Also: a
// peer that disappears or stops participating makes FinishStep return an
// error naming the operation, within the communicator's timeout.
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/sync/testing/synthetic_training.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Data = sync_testing::SyntheticData;
using sync_testing::MakeSyntheticData;
using sync_testing::MakeTestOptimizer;
using sync_testing::RelativeDifference;
using sync_testing::TestStepContext;

constexpr int kSteps = 5;
constexpr int kPerRankBatch = 8;

struct Case {
  std::string spec;
  int world;
  int accumulation;  // micro-batches per step
  bool adamw;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return absl::StrCat(c.spec.rfind("gpt", 0) == 0 ? "gpt" : "mlp", "_w", c.world, "_k",
                      c.accumulation, c.adamw ? "_adamw" : "_sgd");
}

// One process, batch world * b, plain forward/backward/step.
std::vector<float> TrainSingleProcess(const Case& c, const Data& data,
                                      std::vector<float>* initial) {
  kernels::CpuBackend backend;
  const int batch = c.world * kPerRankBatch;
  nn::ModelOptions mo;
  mo.max_batch = batch;
  mo.seed = 7;
  auto model = nn::CreateModel(c.spec, &backend, mo);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  nn::Model& m = **model;
  const int64_t n = m.storage().size();
  initial->assign(m.storage().params(), m.storage().params() + n);
  auto opt = *MakeTestOptimizer(c.adamw, {0, n});
  for (int step = 1; step <= kSteps; ++step) {
    EXPECT_TRUE(m.Forward(data.Slice((step - 1) * batch, batch)).ok());
    EXPECT_TRUE(m.Backward(0.f, nullptr).ok());
    EXPECT_TRUE(
        opt->Step(m.storage().params(), m.storage().grads(), n, TestStepContext(c.adamw, step)).ok());
  }
  return std::vector<float>(m.storage().params(), m.storage().params() + n);
}

// One rank: batch b per step as k micro-batches, the last one's backward
// reporting ranges to the sync.
absl::Status TrainRank(const Case& c, const Data& data, int rank, Communicator& comm,
                       std::vector<float>* params, SyncStats* stats) {
  kernels::CpuBackend backend;
  const int micro = kPerRankBatch / c.accumulation;
  nn::ModelOptions mo;
  mo.max_batch = micro;
  mo.seed = 7;
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::CreateModel(c.spec, &backend, mo));
  AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = model->storage().params();
  o.grads = model->storage().grads();
  o.size = model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(model->layout())) {
    o.ready_ranges.push_back({r.lo, r.hi});
  }
  o.bucket_cap_mb = 0.002;  // ~500 floats: several buckets even for these small models
  o.optimizer = *MakeTestOptimizer(c.adamw, {0, o.size});
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateAllreduceSync(std::move(o)));
  const nn::GradReadyCallback on_ready = [&sync](const nn::GradRange& r) {
    sync->OnGradientsReady(r.lo, r.hi);
  };
  const int global_batch = c.world * kPerRankBatch;
  for (int step = 1; step <= kSteps; ++step) {
    const int first = (step - 1) * global_batch + rank * kPerRankBatch;
    for (int m = 0; m < c.accumulation; ++m) {
      RETURN_IF_ERROR(model->Forward(data.Slice(first + m * micro, micro)));
      const float beta = m == 0 ? 0.f : 1.f;
      if (m + 1 < c.accumulation) {
        RETURN_IF_ERROR(model->Backward(beta, nullptr));
      } else {
        StepOptions so;
        so.grad_scale = 1.f / c.accumulation;
        // As the worker: the context up front, so buckets are stepped as
        // their allreduce completes (step_per_bucket, the default).
        so.context = TestStepContext(c.adamw, step);
        RETURN_IF_ERROR(sync->BeginStep(so));
        RETURN_IF_ERROR(model->Backward(beta, on_ready));
      }
    }
    RETURN_IF_ERROR(sync->FinishStep(TestStepContext(c.adamw, step)));
  }
  params->assign(model->storage().params(), model->storage().params() + model->storage().size());
  *stats = sync->stats();
  return absl::OkStatus();
}

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, RanksMatchOneProcessAtTheGlobalBatch) {
  const Case c = GetParam();
  auto spec = nn::ParseModelSpec(c.spec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const Data data = MakeSyntheticData(*spec, kSteps * c.world * kPerRankBatch);

  std::vector<float> initial;
  const std::vector<float> reference = TrainSingleProcess(c, data, &initial);
  ASSERT_FALSE(reference.empty());
  // The comparison means something only if training moved the parameters
  // far more than the tolerance.
  const double moved = RelativeDifference(reference, initial);
  ASSERT_GT(moved, 1e-3);

  std::vector<std::vector<float>> params(c.world);
  std::vector<SyncStats> stats(c.world);
  auto results = comm_testing::RunGlooRanks(c.world, absl::Seconds(60), [&](int rank, Communicator& comm) {
    return TrainRank(c, data, rank, comm, &params[rank], &stats[rank]);
  });
  for (int r = 0; r < c.world; ++r) ASSERT_TRUE(results[r].ok()) << results[r];

  const double diff = RelativeDifference(params[0], reference);
  std::printf("%s: relative difference %.3g (parameters moved %.3g), %lld buckets/step\n",
              c.spec.c_str(), diff, moved,
              static_cast<long long>(stats[0].buckets / kSteps));
  EXPECT_LE(diff, 1e-5);
  for (int r = 1; r < c.world; ++r) {
    EXPECT_EQ(params[r], params[0]) << "rank " << r << " diverged from rank 0";
  }
  EXPECT_EQ(stats[0].steps, kSteps);
  EXPECT_GT(stats[0].buckets / kSteps, 1) << "expected several buckets per step";
  EXPECT_EQ(stats[0].bytes_sent, kSteps * static_cast<int64_t>(reference.size()) * 4);
}

constexpr char kMlp[] = "mlp:20,32,16,5";
constexpr char kGpt[] = "gpt:layers=1,heads=2,width=16,context=8,vocab=32";

INSTANTIATE_TEST_SUITE_P(
    Mlp, Equivalence,
    ::testing::Values(Case{kMlp, 1, 1, false}, Case{kMlp, 2, 1, false}, Case{kMlp, 4, 1, false},
                      Case{kMlp, 1, 2, false}, Case{kMlp, 2, 2, false}, Case{kMlp, 4, 4, false},
                      Case{kMlp, 1, 1, true}, Case{kMlp, 2, 1, true}, Case{kMlp, 4, 1, true},
                      Case{kMlp, 2, 4, true}, Case{kMlp, 4, 2, true}),
    CaseName);

INSTANTIATE_TEST_SUITE_P(Gpt, Equivalence,
                         ::testing::Values(Case{kGpt, 2, 1, false}, Case{kGpt, 4, 2, true}),
                         CaseName);

// A small vector model for the failure tests: no network model needed.
absl::StatusOr<std::unique_ptr<GradientSync>> VectorSync(Communicator& comm,
                                                         std::vector<float>& params,
                                                         std::vector<float>& grads) {
  AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = params.data();
  o.grads = grads.data();
  o.size = static_cast<int64_t>(params.size());
  o.ready_ranges = {{o.size / 2, o.size}, {0, o.size / 2}};
  o.optimizer = *optim::Sgd::Create({0, o.size}, optim::SgdOptions());
  return CreateAllreduceSync(std::move(o));
}

absl::Status OneStep(GradientSync& sync, int64_t size) {
  RETURN_IF_ERROR(sync.BeginStep({}));
  sync.OnGradientsReady(size / 2, size);
  sync.OnGradientsReady(0, size / 2);
  optim::StepContext ctx;
  ctx.lr = 0.1f;
  return sync.FinishStep(ctx);
}

TEST(AllreduceSyncFailure, PeerThatDisappearsIsAnErrorFromFinishStep) {
  std::vector<float> before;
  std::vector<float> params(1000, 1.f), grads(1000, 1.f);
  absl::Status rank0;
  auto results = comm_testing::RunGlooRanks(2, absl::Milliseconds(500), [&](int rank, Communicator& comm) {
    RETURN_IF_ERROR(comm.Barrier());
    if (rank == 1) return absl::OkStatus();  // leaves: its sockets close
    ASSIGN_OR_RETURN(auto sync, VectorSync(comm, params, grads));
    before = params;
    rank0 = OneStep(*sync, params.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(results[0].ok()) << results[0];
  ASSERT_TRUE(results[1].ok()) << results[1];
  ASSERT_FALSE(rank0.ok());
  EXPECT_NE(rank0.message().find("allreduce"), std::string::npos) << rank0;
  EXPECT_NE(rank0.message().find("rank 0"), std::string::npos) << rank0;
  EXPECT_EQ(params, before) << "a failed step must not change the parameters";
}

TEST(AllreduceSyncFailure, PeerThatStopsParticipatingTimesOut) {
  std::vector<float> params(1000, 1.f), grads(1000, 1.f);
  absl::Status rank0;
  absl::Notification rank0_done;
  auto results = comm_testing::RunGlooRanks(2, absl::Milliseconds(500), [&](int rank, Communicator& comm) {
    RETURN_IF_ERROR(comm.Barrier());
    if (rank == 1) {  // alive and connected, but never joins the step
      rank0_done.WaitForNotification();
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(auto sync, VectorSync(comm, params, grads));
    rank0 = OneStep(*sync, params.size());
    rank0_done.Notify();
    return absl::OkStatus();
  });
  ASSERT_TRUE(results[0].ok()) << results[0];
  ASSERT_EQ(rank0.code(), absl::StatusCode::kDeadlineExceeded) << rank0;
  EXPECT_NE(rank0.message().find("allreduce of bucket 1 of 1"), std::string::npos) << rank0;
  EXPECT_NE(rank0.message().find("rank 0"), std::string::npos) << rank0;
}

}  // namespace
}  // namespace sync
}  // namespace tandem
