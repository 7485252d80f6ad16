// Issue 12's equivalence: `ps` and `hybrid`, built through the registry on
// ranks laid out as (nodes x workers per node) = 1x2, 2x2, 2x1 (a thread
// each, CommGroups from CreateCommGroups: shm inside a node, Gloo across)
// with 1, 2 and 3 shard servers running in this process on port 0, end
// K = 5 steps within 1e-5 of the allreduce strategy on the same layout
// (SGD with momentum and AdamW, a decaying learning rate, accumulation, MLP
// and GPT; pushes overlapped with backward and, without a schedule in the
// env, sent at FinishStep; pulls pipelined behind the pushes and landing
// through the parameter hook during the next forward (the default) or all
// at FinishStep (pipeline=0); servers applying per chunk (the default) or
// per step; nodes of unequal size and one worker per node). The workers hold no optimizer state; every rank
// ends with the same parameters; bad settings are refused with the reason.
// The "_landing" cases (hybrid at 2x2, 3x1 and 2+1, ps at 2x2) also check
// after every step that each layer's Gather returns only once that layer
// has landed (CheckLanding). hybrid with ring_share (issue 33: a prefix of
// the vector by a cross-node ring, stepped on the workers) is equal to
// allreduce too, at 4x1, 2x2 and 2+1 nodes; ring_share=0, and auto with as
// many servers as nodes, are bit-identical to hybrid without it; a
// checkpoint of hybrid with a ring part carries allreduce's optimizer state
// and resumes (HybridRingShare).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "common/sync/testing/synthetic_training.h"
#include "common/tensor/param_hook.h"
#include "gtest/gtest.h"
#include "services/shardserver/shard_server.h"

namespace tandem {
namespace sync {
namespace {

using Data = sync_testing::SyntheticData;
using sync_testing::MakeSyntheticData;
using sync_testing::MakeTestOptimizer;
using sync_testing::RelativeDifference;

constexpr int kSteps = 5;
constexpr int kPerRankBatch = 8;
constexpr char kMlp[] = "mlp:20,32,16,5";
constexpr char kGpt[] = "gpt:layers=1,heads=2,width=16,context=8,vocab=32";
// ~260 floats per chunk: several chunks per server and per hybrid group.
constexpr char kChunkOpt[] = "chunk_mb=0.001";

struct Case {
  std::string strategy;            // "ps" / "hybrid"
  std::vector<std::string> nodes;  // node of every world rank
  int servers;
  bool adamw;
  int accumulation = 1;
  std::string spec = kMlp;
  bool schedule_in_env = true;  // false: pushes wait for FinishStep
  std::string extra_opt = "";   // more --sync_opt, e.g. apply=chunk
  bool check_landing = false;   // CheckLanding after every step
};

// "apply=step" -> "applystep" (test names take letters, digits and _).
std::string Identifier(std::string s) {
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return !std::isalnum(c) && c != '_'; }),
          s.end());
  return s;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return absl::StrCat(c.strategy, "_", c.spec.rfind("gpt", 0) == 0 ? "gpt" : "mlp", "_",
                      absl::StrJoin(c.nodes, ""), "_s", c.servers, c.adamw ? "_adamw" : "_sgd",
                      "_k", c.accumulation, c.schedule_in_env ? "" : "_noschedule",
                      c.extra_opt.empty() ? "" : "_" + Identifier(c.extra_opt),
                      c.check_landing ? "_landing" : "");
}

std::string UniquePrefix(const std::string& extra) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat(info->test_suite_name(), "_", info->name(), extra);
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return absl::StrCat("ps_equivalence_test_", getpid(), "/", name);
}

// A decaying schedule, so a wrong step's learning rate would show.
float LearningRate(bool adamw, int64_t step) {
  return (adamw ? 1e-2f : 0.1f) / static_cast<float>(step);
}

struct RankResult {
  std::vector<float> params;
  SyncMemory memory;
  bool has_optimizer = true;
};

// Layer-by-layer landing (issue 33 item 1): right after FinishStep the
// step's parameters are still arriving. Ask for each layer through the hook,
// last layer first (the order backward pushed them and they land), and keep
// what the layer held the moment its Gather returned; once everything has
// landed, no layer may have changed after its Gather: a Gather that
// returned before its layer landed shows here as a difference.
absl::Status CheckLanding(nn::Model& model, tensor::ParamHook* hook) {
  const float* p = model.storage().params();
  const auto& ranges = model.param_hook_ranges();
  std::vector<std::vector<float>> seen;
  for (auto r = ranges.rbegin(); r != ranges.rend(); ++r) {
    RETURN_IF_ERROR(hook->Gather(r->first, r->second, tensor::ParamPass::kForward));
    seen.emplace_back(p + r->first, p + r->second);
  }
  RETURN_IF_ERROR(hook->Gather(0, model.storage().size(), tensor::ParamPass::kForward));
  for (size_t i = 0; i < seen.size(); ++i) {
    const auto& r = ranges[ranges.size() - 1 - i];
    if (!std::equal(seen[i].begin(), seen[i].end(), p + r.first)) {
      return absl::InternalError(absl::StrCat("layer [", r.first, ", ", r.second,
                                              ") changed after its Gather returned"));
    }
  }
  return absl::OkStatus();
}

absl::Status TrainRank(const Case& c, const std::string& strategy,
                       const std::vector<std::string>& servers, const Data& data, int rank,
                       CommGroups& groups, RankResult* out) {
  kernels::CpuBackend backend;
  const int micro = kPerRankBatch / c.accumulation;
  nn::ModelOptions mo;
  mo.max_batch = micro;
  mo.seed = 7;
  ASSIGN_OR_RETURN(nn::ModelSpec spec, nn::ParseModelSpec(c.spec));
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::CreateModel(spec, &backend, mo));
  ASSIGN_OR_RETURN(
      SyncOptions options,
      ParseSyncOptions(strategy, strategy == "allreduce"
                                     ? ""
                                     : absl::StrCat(kChunkOpt, c.extra_opt.empty() ? "" : ",",
                                                    c.extra_opt)));
  options.bucket_cap_mb = 0.002;
  SyncEnv env;
  env.comms = &groups;
  env.params = model->storage().params();
  env.grads = model->storage().grads();
  env.size = model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(model->layout())) {
    env.ready_ranges.push_back({r.lo, r.hi});
  }
  const bool adamw = c.adamw;
  env.make_optimizer = [adamw](optim::ParamRange r) { return MakeTestOptimizer(adamw, r); };
  env.shard_servers.addresses = servers;
  env.shard_servers.job_id = "equivalence";
  env.shard_servers.generation = 1;
  if (c.schedule_in_env) {
    env.shard_servers.learning_rate = [adamw](int64_t step) { return LearningRate(adamw, step); };
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateGradientSync(options, std::move(env)));
  // pipeline=1: pulls land while the next forward runs, through the hook
  // (what the worker installs for the generation).
  tensor::ParamHook* hook = sync->param_hook();
  model->set_param_hook(hook);
  const nn::GradReadyCallback on_ready = [&sync](const nn::GradRange& r) {
    sync->OnGradientsReady(r.lo, r.hi);
  };
  const int global_batch = static_cast<int>(c.nodes.size()) * kPerRankBatch;
  for (int step = 1; step <= kSteps; ++step) {
    RETURN_IF_ERROR(sync->BeforeForward());
    const int first = (step - 1) * global_batch + rank * kPerRankBatch;
    for (int m = 0; m < c.accumulation; ++m) {
      RETURN_IF_ERROR(model->Forward(data.Slice(first + m * micro, micro)));
      const float beta = m == 0 ? 0.f : 1.f;
      if (m + 1 < c.accumulation) {
        RETURN_IF_ERROR(model->Backward(beta, nullptr));
      } else {
        StepOptions so;
        so.grad_scale = 1.f / c.accumulation;
        RETURN_IF_ERROR(sync->BeginStep(so));
        RETURN_IF_ERROR(model->Backward(beta, on_ready));
      }
    }
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = LearningRate(adamw, step);
    RETURN_IF_ERROR(sync->FinishStep(ctx));
    if (c.check_landing && strategy != "allreduce") {
      if (hook == nullptr) return absl::InternalError("check_landing: the strategy gave no hook");
      RETURN_IF_ERROR(CheckLanding(*model, hook));
    }
  }
  if (hook != nullptr) {  // what the worker does at the generation's end
    RETURN_IF_ERROR(hook->Gather(0, model->storage().size(), tensor::ParamPass::kForward));
    model->set_param_hook(nullptr);
  }
  out->params.assign(model->storage().params(),
                     model->storage().params() + model->storage().size());
  out->memory = sync->memory();
  out->has_optimizer = sync->optimizer() != nullptr;
  return absl::OkStatus();
}

std::vector<RankResult> RunStrategy(const Case& c, const std::string& strategy, const Data& data,
                            const std::vector<std::string>& servers) {
  std::vector<RankResult> results(c.nodes.size());
  const auto statuses = hier_testing::RunGroupRanks(
      c.nodes, /*node_groups=*/true, UniquePrefix(strategy + Identifier(c.extra_opt)),
      [&](int rank, CommGroups& g) {
        return TrainRank(c, strategy, servers, data, rank, g, &results[rank]);
      });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << strategy << " rank " << r << ": " << statuses[r];
  }
  return results;
}

// n shard servers in this process on port 0 (kept in *servers); their
// addresses (fewer, with a test failure, if one does not start).
std::vector<std::string> StartServers(int n,
                                      std::vector<std::unique_ptr<shardserver::ShardServer>>* servers) {
  std::vector<std::string> addresses;
  for (int s = 0; s < n; ++s) {
    auto server = shardserver::ShardServer::Start({});
    if (!server.ok()) {
      ADD_FAILURE() << server.status();
      break;
    }
    addresses.push_back((*server)->address());
    servers->push_back(std::move(*server));
  }
  return addresses;
}

class PsEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(PsEquivalence, EndsEqualToAllreduce) {
  const Case c = GetParam();
  const nn::ModelSpec spec = *nn::ParseModelSpec(c.spec);
  const Data data = MakeSyntheticData(spec, kSteps * static_cast<int>(c.nodes.size()) * kPerRankBatch);

  std::vector<std::unique_ptr<shardserver::ShardServer>> servers;
  const std::vector<std::string> addresses = StartServers(c.servers, &servers);
  ASSERT_EQ(static_cast<int>(addresses.size()), c.servers);
  const std::vector<RankResult> reference = RunStrategy(c, "allreduce", data, {});
  const std::vector<RankResult> remote = RunStrategy(c, c.strategy, data, addresses);
  ASSERT_FALSE(reference[0].params.empty());
  ASSERT_FALSE(remote[0].params.empty());

  std::vector<float> initial;
  {
    kernels::CpuBackend backend;
    nn::ModelOptions mo;
    mo.seed = 7;
    auto m = nn::CreateModel(spec, &backend, mo);
    ASSERT_TRUE(m.ok());
    initial.assign((*m)->storage().params(), (*m)->storage().params() + (*m)->storage().size());
  }
  const double moved = RelativeDifference(reference[0].params, initial);
  const double diff = RelativeDifference(remote[0].params, reference[0].params);
  std::printf("%s: relative difference to allreduce %.3g (parameters moved %.3g)\n",
              CaseName({c, 0}).c_str(), diff, moved);
  ASSERT_GT(moved, 1e-4) << "training must move the parameters for the comparison to mean much";
  EXPECT_LE(diff, 1e-5);
  for (size_t r = 0; r < remote.size(); ++r) {
    EXPECT_EQ(remote[r].params, remote[0].params) << "rank " << r;
    // The worker's optimizer is the servers' mirror: it holds nothing
    // outside checkpoints (but the ring part's state, with ring_share).
    EXPECT_TRUE(remote[r].has_optimizer) << "rank " << r;
    if (c.extra_opt.find("ring_share") == std::string::npos) {
      EXPECT_EQ(remote[r].memory.optimizer_bytes, 0) << "rank " << r;
    } else {
      EXPECT_GT(remote[r].memory.optimizer_bytes, 0) << "rank " << r;
    }
    EXPECT_GT(reference[r].memory.optimizer_bytes, 0);
  }
  // The servers applied exactly K steps.
  for (auto& s : servers) EXPECT_EQ(s->store()->info().step, kSteps);
}

INSTANTIATE_TEST_SUITE_P(
    Ps, PsEquivalence,
    ::testing::Values(Case{"ps", {"a", "a"}, 1, false}, Case{"ps", {"a", "a"}, 1, true},
                      Case{"ps", {"a", "a", "b", "b"}, 2, false},
                      Case{"ps", {"a", "a", "b", "b"}, 2, true},
                      Case{"ps", {"a", "b"}, 3, false}, Case{"ps", {"a", "b"}, 3, true},
                      Case{"ps", {"a", "a", "b", "b"}, 2, true, 2},
                      Case{"ps", {"a", "b"}, 3, false, 1, kMlp, /*schedule_in_env=*/false},
                      Case{"ps", {"a", "a", "b", "b"}, 2, true, 1, kGpt},
                      Case{"ps", {"a", "a", "b", "b"}, 2, true, 1, kMlp, true, "apply=step"},
                      Case{"ps", {"a", "b"}, 3, false, 2, kMlp, true, "apply=step"},
                      Case{"ps", {"a", "a", "b", "b"}, 2, true, 1, kMlp, true, "pipeline=0"},
                      Case{"ps", {"a", "a", "b"}, 2, true},       // nodes of 2 and 1
                      Case{"ps", {"a", "b", "c"}, 2, false, 2},   // 3x1, fewer servers
                      Case{"ps", {"a", "b", "c"}, 3, true, 1, kGpt, false},
                      Case{"ps", {"a", "a", "b", "b"}, 2, true, 1, kMlp, true, "", true},
                      // More pull lanes than push lanes (and fewer).
                      Case{"ps", {"a", "b", "c"}, 3, true, 1, kMlp, true, "pull_streams=5"}),
    CaseName);

INSTANTIATE_TEST_SUITE_P(
    Hybrid, PsEquivalence,
    ::testing::Values(Case{"hybrid", {"a", "a"}, 1, false}, Case{"hybrid", {"a", "a"}, 1, true},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, false},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, true},
                      Case{"hybrid", {"a", "b"}, 3, false}, Case{"hybrid", {"a", "b"}, 3, true},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, false, 2},
                      Case{"hybrid", {"a", "a", "b"}, 2, true},  // nodes of 2 and 1
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, false, 1, kMlp, false},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, true, 1, kGpt},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, true, 1, kMlp, true, "apply=step"},
                      Case{"hybrid", {"a", "a"}, 1, false, 2, kMlp, false, "apply=step"},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, true, 1, kMlp, true, "pipeline=0"},
                      Case{"hybrid", {"a", "b", "c"}, 2, true},  // 3x1, fewer servers
                      // Layer-by-layer landing, checked every step (CheckLanding).
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, true, 1, kMlp, true, "", true},
                      Case{"hybrid", {"a", "b", "c"}, 3, false, 1, kMlp, true, "", true},
                      Case{"hybrid", {"a", "a", "b"}, 2, true, 1, kMlp, true, "", true},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, true, 1, kGpt, true, "", true},
                      // A server per node, 3 and 1 pull lanes per server
                      // against 2 push lanes, landing checked every step.
                      Case{"hybrid", {"a", "b", "c", "d"}, 4, true, 1, kMlp, true,
                           "pull_streams=3", true},
                      Case{"hybrid", {"a", "a", "b", "b"}, 2, false, 1, kMlp, true,
                           "pull_streams=1", true},
                      // ring_share: 4x1 with 2 servers (auto: f = 0.4), 2x2
                      // with one (hier ring), nodes of 2 and 1 (flat ring),
                      // the GPT, accumulation, pushes at FinishStep.
                      Case{"hybrid", {"a", "b", "c", "d"}, 2, true, 1, kMlp, true,
                           "ring_share=auto", true},
                      Case{"hybrid", {"a", "a", "b", "b"}, 1, false, 2, kMlp, true,
                           "ring_share=0.5"},
                      Case{"hybrid", {"a", "a", "b"}, 2, true, 1, kMlp, false, "ring_share=0.4",
                           true},
                      Case{"hybrid", {"a", "a", "b", "b"}, 1, true, 1, kGpt, true,
                           "ring_share=0.3"}),
    CaseName);

TEST(PsRegistry, RefusesWhatItCannotDo) {
  for (const char* name : {"ps", "hybrid"}) {
    ASSERT_TRUE(FindStrategy(name).ok()) << name;
    absl::StatusOr<SyncOptions> o = ParseSyncOptions(name, "max_grad_norm=1");
    ASSERT_TRUE(o.ok());
    absl::Status s = ValidateSyncOptions(*o);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_NE(s.message().find("max_grad_norm"), std::string::npos) << s;
    // The valid keys an unknown key's error lists leave max_grad_norm out.
    o = ParseSyncOptions(name, "no_such_key=1");
    ASSERT_TRUE(o.ok());
    s = ValidateSyncOptions(*o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("bucket_cap_mb"), std::string::npos) << s;
    EXPECT_EQ(s.message().find("max_grad_norm"), std::string::npos) << s;
    o = ParseSyncOptions(name, "streams=0");
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(ValidateSyncOptions(*o).code(), absl::StatusCode::kInvalidArgument);
    o = ParseSyncOptions(name, "nonsense=1");
    ASSERT_TRUE(o.ok());
    s = ValidateSyncOptions(*o);
    EXPECT_NE(s.message().find("chunk_mb"), std::string::npos) << s;
  }
  // No servers: the worker is told which flag to give.
  const auto statuses = hier_testing::RunGroupRanks(
      {"a"}, true, UniquePrefix(""), [](int, CommGroups& g) -> absl::Status {
        std::vector<float> p(10), gr(10);
        SyncEnv env;
        env.comms = &g;
        env.params = p.data();
        env.grads = gr.data();
        env.size = 10;
        env.ready_ranges = {{0, 10}};
        env.make_optimizer = [](optim::ParamRange r) { return MakeTestOptimizer(false, r); };
        absl::StatusOr<std::unique_ptr<GradientSync>> s =
            CreateGradientSync(*ParseSyncOptions("ps", ""), std::move(env));
        if (s.ok()) return absl::InternalError("created without servers");
        if (s.status().message().find("--shard_servers") == std::string::npos) {
          return absl::InternalError(std::string(s.status().message()));
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
}

// ---- Moving between strategies through the checkpointed state ----------

struct Carry {
  std::vector<float> params;
  std::vector<std::pair<std::string, std::vector<float>>> state;  // whole vectors
};

// Steps [first, last] of the schedule under `strategy`, starting from `in`
// (params and optimizer state, as a checkpoint restore leaves them) when
// given; rank 0 then fills `out` the way a checkpoint write reads them.
absl::Status TrainSpan(const std::string& strategy, const std::vector<std::string>& servers,
                       int64_t generation, const Data& data, int rank, int world,
                       CommGroups& groups, int first, int last, const Carry* in, Carry* out) {
  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = kPerRankBatch;
  mo.seed = 7;
  ASSIGN_OR_RETURN(nn::ModelSpec spec, nn::ParseModelSpec(kMlp));
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::CreateModel(spec, &backend, mo));
  // "hybrid ring_share=0.4": the strategy and more --sync_opt.
  const std::string name = strategy.substr(0, strategy.find(' '));
  const std::string more =
      strategy.find(' ') == std::string::npos ? "" : "," + strategy.substr(strategy.find(' ') + 1);
  ASSIGN_OR_RETURN(SyncOptions options,
                   ParseSyncOptions(name, name == "allreduce" ? "" : kChunkOpt + more));
  SyncEnv env;
  env.comms = &groups;
  env.params = model->storage().params();
  env.grads = model->storage().grads();
  env.size = model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(model->layout())) {
    env.ready_ranges.push_back({r.lo, r.hi});
  }
  env.make_optimizer = [](optim::ParamRange r) { return MakeTestOptimizer(true, r); };
  env.shard_servers.addresses = servers;
  env.shard_servers.job_id = "equivalence";
  env.shard_servers.generation = generation;
  env.shard_servers.learning_rate = [](int64_t step) { return LearningRate(true, step); };
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateGradientSync(options, std::move(env)));
  const int64_t n = model->storage().size();
  if (in != nullptr) {
    std::copy(in->params.begin(), in->params.end(), model->storage().params());
    const optim::ParamRange owned = sync->owned_range();
    for (optim::StateBuffer& b : sync->optimizer()->state()) {
      bool found = false;
      for (const auto& [name, values] : in->state) {
        if (name != b.name) continue;
        found = true;
        std::copy(values.begin() + owned.lo, values.begin() + owned.hi, b.data.begin());
      }
      if (!found) return absl::NotFoundError(b.name);
    }
    RETURN_IF_ERROR(sync->StateLoaded());
  }
  // pipeline=1: pulls land while the next forward runs, through the hook
  // (what the worker installs for the generation).
  tensor::ParamHook* hook = sync->param_hook();
  model->set_param_hook(hook);
  const nn::GradReadyCallback on_ready = [&sync](const nn::GradRange& r) {
    sync->OnGradientsReady(r.lo, r.hi);
  };
  for (int step = first; step <= last; ++step) {
    RETURN_IF_ERROR(sync->BeforeForward());
    RETURN_IF_ERROR(
        model->Forward(data.Slice((step - 1) * world * kPerRankBatch + rank * kPerRankBatch,
                                  kPerRankBatch)));
    RETURN_IF_ERROR(sync->BeginStep(StepOptions{}));
    RETURN_IF_ERROR(model->Backward(0.f, on_ready));
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = LearningRate(true, step);
    RETURN_IF_ERROR(sync->FinishStep(ctx));
  }
  RETURN_IF_ERROR(sync->SyncStateToHost());
  if (rank == 0 && out != nullptr) {
    out->params.assign(model->storage().params(), model->storage().params() + n);
    out->state.clear();
    for (const optim::StateBuffer& b : sync->optimizer()->state()) {
      if (static_cast<int64_t>(b.data.size()) != n) {
        return absl::InternalError(absl::StrCat(b.name, " is not the whole vector on rank 0"));
      }
      out->state.push_back({b.name, std::vector<float>(b.data.begin(), b.data.end())});
    }
  }
  return absl::OkStatus();
}

// TrainSpan on a thread per rank of `nodes`.
void RunSpan(const std::vector<std::string>& nodes, const std::vector<std::string>& addresses,
             const Data& data, const std::string& strategy, int64_t generation, int first,
             int last, const Carry* in, Carry* out, const std::string& tag) {
  const int world = static_cast<int>(nodes.size());
  const auto st = hier_testing::RunGroupRanks(nodes, true, UniquePrefix(tag),
                                              [&](int rank, CommGroups& g) {
    return TrainSpan(strategy, addresses, generation, data, rank, world, g, first, last, in, out);
  });
  for (const absl::Status& s : st) EXPECT_TRUE(s.ok()) << tag << ": " << s;
}

TEST(PsCheckpointState, AJobMovesBetweenPsHybridAndAllreduce) {
  const std::vector<std::string> nodes = {"a", "a", "b", "b"};
  const int world = 4;
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kMlp), kSteps * world * kPerRankBatch);
  std::vector<std::unique_ptr<shardserver::ShardServer>> servers;
  const std::vector<std::string> addresses = StartServers(2, &servers);
  auto span = [&](const std::string& strategy, int64_t generation, int first, int last,
                  const Carry* in, Carry* out, const std::string& tag) {
    RunSpan(nodes, addresses, data, strategy, generation, first, last, in, out, tag);
  };
  Carry reference, ps3, ps_then_ar, ar3, ar_then_hybrid;
  span("allreduce", 0, 1, kSteps, nullptr, &reference, "ref");
  span("ps", 1, 1, 3, nullptr, &ps3, "ps3");
  ASSERT_EQ(ps3.state.size(), 2u);  // exp_avg, exp_avg_sq fetched from the servers
  span("allreduce", 0, 4, kSteps, &ps3, &ps_then_ar, "ps_then_ar");
  span("allreduce", 0, 1, 3, nullptr, &ar3, "ar3");
  // The servers are at step 3 of generation 1 with ps's own state; the
  // restored allreduce state replaces it (generation 2).
  span("hybrid", 2, 4, kSteps, &ar3, &ar_then_hybrid, "ar_then_hybrid");
  ASSERT_FALSE(reference.params.empty());
  ASSERT_FALSE(ps_then_ar.params.empty());
  ASSERT_FALSE(ar_then_hybrid.params.empty());
  // The saved ps state is allreduce's at step 3.
  for (size_t b = 0; b < ps3.state.size(); ++b) {
    EXPECT_LE(RelativeDifference(ps3.state[b].second, ar3.state[b].second), 1e-5)
        << ps3.state[b].first;
  }
  EXPECT_LE(RelativeDifference(ps_then_ar.params, reference.params), 1e-5);
  EXPECT_LE(RelativeDifference(ar_then_hybrid.params, reference.params), 1e-5);
  for (size_t b = 0; b < reference.state.size(); ++b) {
    EXPECT_LE(RelativeDifference(ar_then_hybrid.state[b].second, reference.state[b].second), 1e-5)
        << reference.state[b].first;
  }
}

// ring_share=0, and auto with as many servers as nodes (f = 0), run
// today's hybrid: the same bits.
TEST(HybridRingShare, ZeroIsTodaysHybridBitForBit) {
  const Case base{"hybrid", {"a", "a", "b", "b"}, 2, true};
  const nn::ModelSpec spec = *nn::ParseModelSpec(base.spec);
  const Data data = MakeSyntheticData(spec, kSteps * 4 * kPerRankBatch);
  std::vector<std::vector<float>> params;
  for (const char* opt : {"", "ring_share=0", "ring_share=auto"}) {
    std::vector<std::unique_ptr<shardserver::ShardServer>> servers;
    const std::vector<std::string> addresses = StartServers(base.servers, &servers);
    ASSERT_EQ(static_cast<int>(addresses.size()), base.servers);
    Case c = base;
    c.extra_opt = opt;
    params.push_back(RunStrategy(c, "hybrid", data, addresses)[0].params);
    ASSERT_FALSE(params.back().empty()) << opt;
  }
  EXPECT_EQ(params[1], params[0]);
  EXPECT_EQ(params[2], params[0]);
}

TEST(HybridRingShare, RefusesBadValues) {
  for (const char* bad : {"ring_share=1", "ring_share=-0.5", "ring_share=half",
                          "ring_share=0.4,compress=int8"}) {
    absl::StatusOr<SyncOptions> o = ParseSyncOptions("hybrid", bad);
    ASSERT_TRUE(o.ok());
    absl::Status s = ValidateSyncOptions(*o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("ring_share"), std::string::npos) << s;
  }
}

// A checkpoint of hybrid with a ring part: the ring part's optimizer state
// (on the workers) and the servers' together are allreduce's at step 3, a
// resume (a new generation on the same servers) ends equal to an
// uninterrupted allreduce, and so does allreduce resuming from it.
TEST(HybridRingShare, CheckpointCarriesTheRingPartsState) {
  const std::vector<std::string> nodes = {"a", "a", "b", "b"};
  const int world = 4;
  const Data data = MakeSyntheticData(*nn::ParseModelSpec(kMlp), kSteps * world * kPerRankBatch);
  std::vector<std::unique_ptr<shardserver::ShardServer>> servers;
  const std::vector<std::string> addresses = StartServers(1, &servers);
  auto span = [&](const std::string& strategy, int64_t generation, int first, int last,
                  const Carry* in, Carry* out, const std::string& tag) {
    RunSpan(nodes, addresses, data, strategy, generation, first, last, in, out, tag);
  };
  const std::string ring = "hybrid ring_share=0.5";
  Carry reference, ar3, ring3, ring_then_ring, ring_then_ar;
  span("allreduce", 0, 1, kSteps, nullptr, &reference, "ref");
  span("allreduce", 0, 1, 3, nullptr, &ar3, "ar3");
  span(ring, 1, 1, 3, nullptr, &ring3, "ring3");
  ASSERT_EQ(ring3.state.size(), 2u);
  ASSERT_EQ(ring3.state.size(), ar3.state.size());
  for (size_t b = 0; b < ring3.state.size(); ++b) {
    EXPECT_LE(RelativeDifference(ring3.state[b].second, ar3.state[b].second), 1e-5)
        << ring3.state[b].first;
  }
  span(ring, 2, 4, kSteps, &ring3, &ring_then_ring, "ring_then_ring");
  span("allreduce", 0, 4, kSteps, &ring3, &ring_then_ar, "ring_then_ar");
  ASSERT_FALSE(ring_then_ring.params.empty());
  ASSERT_FALSE(ring_then_ar.params.empty());
  EXPECT_LE(RelativeDifference(ring_then_ring.params, reference.params), 1e-5);
  EXPECT_LE(RelativeDifference(ring_then_ar.params, reference.params), 1e-5);
  for (size_t b = 0; b < reference.state.size(); ++b) {
    EXPECT_LE(RelativeDifference(ring_then_ring.state[b].second, reference.state[b].second), 1e-5)
        << reference.state[b].first;
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
