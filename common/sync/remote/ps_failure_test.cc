// `ps` and `hybrid` when a worker is lost mid-push: two ranks on two nodes
// and one in-process shard server train step 1 together; at step 2 rank 1
// pushes the gradients of its last layer only and is gone. Rank 0's
// step (FinishStep, or with pipelined pulls the next forward's wait for
// them) must return DEADLINE_EXCEEDED within the configured timeout
// (never hang), naming the server; with apply=step the server must still
// hold step 1's parameters: nothing of step 2 applied. A new generation initialised by
// the survivor at step 1 trains on from there.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "common/tensor/param_hook.h"
#include "gtest/gtest.h"
#include "services/shardserver/shard_server.h"

namespace tandem {
namespace sync {
namespace {

constexpr char kMlp[] = "mlp:20,32,16,5";
constexpr int kBatch = 8;

absl::StatusOr<std::unique_ptr<optim::Optimizer>> MakeSgd(optim::ParamRange r) {
  optim::SgdOptions o;
  o.momentum = 0.9f;
  ASSIGN_OR_RETURN(auto s, optim::Sgd::Create(r, o));
  return std::unique_ptr<optim::Optimizer>(std::move(s));
}

struct Rank {
  kernels::CpuBackend backend;
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<GradientSync> sync;
  std::vector<float> features;
  std::vector<int32_t> labels;
};

absl::Status SetUpRank(const std::string& strategy, const std::string& server, int64_t generation,
                   int rank, CommGroups& g, Rank* r) {
  nn::ModelOptions mo;
  mo.max_batch = kBatch;
  mo.seed = 7;
  ASSIGN_OR_RETURN(nn::ModelSpec spec, nn::ParseModelSpec(kMlp));
  ASSIGN_OR_RETURN(r->model, nn::CreateModel(spec, &r->backend, mo));
  std::mt19937 rng(100 + rank);
  std::normal_distribution<float> normal(0.f, 1.f);
  r->features.resize(kBatch * 20);
  for (float& x : r->features) x = normal(rng);
  r->labels.resize(kBatch);
  for (int32_t& y : r->labels) y = static_cast<int32_t>(rng() % 5);
  // hybrid: ring_share=0, so every chunk goes by the server whose deadline
  // this tests (with one server the default would send half by a ring).
  const std::string opts = absl::StrCat("chunk_mb=0.001,timeout_s=2,apply=step",
                                        strategy == "hybrid" ? ",ring_share=0" : "");
  ASSIGN_OR_RETURN(SyncOptions o, ParseSyncOptions(strategy, opts));
  SyncEnv env;
  env.comms = &g;
  env.params = r->model->storage().params();
  env.grads = r->model->storage().grads();
  env.size = r->model->storage().size();
  for (const nn::GradRange& gr : nn::GroupRanges(r->model->layout())) {
    env.ready_ranges.push_back({gr.lo, gr.hi});
  }
  env.make_optimizer = MakeSgd;
  env.shard_servers.addresses = {server};
  env.shard_servers.job_id = "failure";
  env.shard_servers.generation = generation;
  env.shard_servers.learning_rate = [](int64_t) { return 0.1f; };
  ASSIGN_OR_RETURN(r->sync, CreateGradientSync(o, std::move(env)));
  r->model->set_param_hook(r->sync->param_hook());
  return absl::OkStatus();
}

// One step; with `only_first_range`, backward's first reported range is
// the only one handed to the sync, and the step is abandoned there.
absl::Status Step(Rank& r, int step, bool only_first_range) {
  nn::Batch b;
  b.size = kBatch;
  b.features = r.features.data();
  b.labels = r.labels.data();
  RETURN_IF_ERROR(r.sync->BeforeForward());
  RETURN_IF_ERROR(r.model->Forward(b));
  RETURN_IF_ERROR(r.sync->BeginStep(StepOptions{}));
  bool first = true;
  GradientSync* s = r.sync.get();
  RETURN_IF_ERROR(r.model->Backward(0.f, [&](const nn::GradRange& g) {
    if (!only_first_range || first) s->OnGradientsReady(g.lo, g.hi);
    first = false;
  }));
  if (only_first_range) return absl::OkStatus();
  optim::StepContext ctx;
  ctx.step = step;
  ctx.lr = 0.1f;
  RETURN_IF_ERROR(r.sync->FinishStep(ctx));
  // Pipelined pulls land during the next forward: wait as it would.
  if (tensor::ParamHook* hook = r.sync->param_hook(); hook != nullptr) {
    RETURN_IF_ERROR(hook->Gather(0, r.model->storage().size(), tensor::ParamPass::kForward));
  }
  return absl::OkStatus();
}

class PsFailure : public ::testing::TestWithParam<std::string> {};

TEST_P(PsFailure, ALostWorkerLeavesNothingOfItsStepApplied) {
  const std::string strategy = GetParam();
  auto server = shardserver::ShardServer::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = (*server)->address();
  std::vector<float> after_step1(2);
  absl::Status survivor;
  absl::Duration waited;
  const auto statuses = hier_testing::RunGroupRanks(
      {"a", "b"}, true, absl::StrCat("ps_failure_test_", getpid(), "_", strategy),
      [&](int rank, CommGroups& g) -> absl::Status {
        Rank r;
        RETURN_IF_ERROR(SetUpRank(strategy, address, 1, rank, g, &r));
        RETURN_IF_ERROR(Step(r, 1, false));
        if (rank == 0) {
          after_step1.assign(r.model->storage().params(),
                             r.model->storage().params() + r.model->storage().size());
        }
        if (rank == 1) {
          RETURN_IF_ERROR(Step(r, 2, /*only_first_range=*/true));
          r.sync.reset();  // the worker is gone: its streams are cancelled
          return absl::OkStatus();
        }
        const absl::Time start = absl::Now();
        survivor = Step(r, 2, false);
        waited = absl::Now() - start;
        return absl::OkStatus();
      });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(survivor.code(), absl::StatusCode::kDeadlineExceeded) << survivor;
  EXPECT_NE(survivor.message().find(address), std::string::npos) << survivor;
  EXPECT_LT(waited, absl::Seconds(30)) << "FinishStep must end at the timeout, not hang";
  // The server still holds step 1: nothing of step 2 was applied.
  EXPECT_EQ((*server)->store()->info().step, 1);
  std::vector<float> held(after_step1.size(), 0.f);
  ASSERT_TRUE((*server)->store()->ReadParams(1, 1, 0, held.size(), held.data()).ok());
  EXPECT_EQ(held, after_step1);

  // The survivor starts generation 2 alone from step 1 and trains on.
  const auto again = hier_testing::RunGroupRanks(
      {"a"}, true, absl::StrCat("ps_failure_test_", getpid(), "_", strategy, "_gen2"),
      [&](int rank, CommGroups& g) -> absl::Status {
        Rank r;
        RETURN_IF_ERROR(SetUpRank(strategy, address, 2, rank, g, &r));
        std::copy(after_step1.begin(), after_step1.end(), r.model->storage().params());
        RETURN_IF_ERROR(Step(r, 2, false));
        return Step(r, 3, false);
      });
  ASSERT_TRUE(again[0].ok()) << again[0];
  EXPECT_EQ((*server)->store()->info().step, 3);
  EXPECT_EQ((*server)->store()->info().world_size, 1);
}

INSTANTIATE_TEST_SUITE_P(Strategies, PsFailure, ::testing::Values("ps", "hybrid"));

}  // namespace
}  // namespace sync
}  // namespace tandem
