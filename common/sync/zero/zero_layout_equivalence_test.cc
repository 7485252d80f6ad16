// Issue 33 item 2: zero1 / zero2 (slices gathered during the next forward)
// and zero3 on real node layouts (a thread per rank, CommGroups: shm inside
// a node, Gloo across) — one node of 4, 2 x 2, 4 x 1, 3 x 1 and nodes of 2
// and 1 — end K = 5 steps within 1e-5 of the allreduce strategy on the same
// layout, every rank with the same parameters. The layer gathers
// (layer_gather.h) and zero1/zero2's rounds take a different collective at
// each layout; this is where a wrong one would show.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "common/sync/testing/synthetic_training.h"
#include "common/tensor/param_hook.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Data = sync_testing::SyntheticData;

constexpr int kSteps = 5;
constexpr int kBatch = 8;
constexpr char kMlp[] = "mlp:20,32,16,5";

struct Case {
  std::string strategy;            // zero1, zero2, zero3
  std::vector<std::string> nodes;  // node of every world rank
  bool adamw;
  std::string opts = "";           // --sync_opt
  // One node (shm): the pieces collectives sum in the shm allreduce's rank
  // order, so zero1/zero2/zero3 end bit for bit equal to it.
  bool exact = false;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string opts = info.param.opts;
  for (char& ch : opts) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return absl::StrCat(info.param.strategy, "_", absl::StrJoin(info.param.nodes, ""),
                      info.param.adamw ? "_adamw" : "_sgd", opts.empty() ? "" : "_", opts);
}

absl::Status TrainRank(const Case& c, const std::string& strategy, const Data& data, int rank,
                       CommGroups& groups, std::vector<float>* out) {
  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = kBatch;
  mo.seed = 7;
  ASSIGN_OR_RETURN(nn::ModelSpec spec, nn::ParseModelSpec(kMlp));
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::CreateModel(spec, &backend, mo));
  ASSIGN_OR_RETURN(SyncOptions options,
                   ParseSyncOptions(strategy, strategy == "allreduce" ? "" : c.opts));
  options.bucket_cap_mb = 0.002;
  SyncEnv env;
  env.comms = &groups;
  env.params = model->storage().params();
  env.grads = model->storage().grads();
  env.size = model->storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(model->layout())) {
    env.ready_ranges.push_back({r.lo, r.hi});
  }
  env.layer_ranges = model->param_hook_ranges();
  const bool adamw = c.adamw;
  env.make_optimizer = [adamw](optim::ParamRange r) {
    return sync_testing::MakeTestOptimizer(adamw, r);
  };
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateGradientSync(options, std::move(env)));
  tensor::ParamHook* hook = sync->param_hook();  // what the worker installs
  model->set_param_hook(hook);
  const nn::GradReadyCallback on_ready = [&sync](const nn::GradRange& r) {
    sync->OnGradientsReady(r.lo, r.hi);
  };
  const int world = static_cast<int>(c.nodes.size());
  for (int step = 1; step <= kSteps; ++step) {
    RETURN_IF_ERROR(sync->BeforeForward());
    RETURN_IF_ERROR(model->Forward(data.Slice(((step - 1) * world + rank) * kBatch, kBatch)));
    RETURN_IF_ERROR(sync->BeginStep(StepOptions{}));
    RETURN_IF_ERROR(model->Backward(0.f, on_ready));
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = adamw ? 1e-2f : 0.1f;
    RETURN_IF_ERROR(sync->FinishStep(ctx));
  }
  if (hook != nullptr) {
    RETURN_IF_ERROR(hook->Gather(0, model->storage().size(), tensor::ParamPass::kForward));
    model->set_param_hook(nullptr);
  }
  out->assign(model->storage().params(), model->storage().params() + model->storage().size());
  return absl::OkStatus();
}

std::vector<std::vector<float>> RunLayout(const Case& c, const std::string& strategy, const Data& data) {
  std::vector<std::vector<float>> params(c.nodes.size());
  const auto statuses = hier_testing::RunGroupRanks(
      c.nodes, /*node_groups=*/true,
      absl::StrCat("zero_layout_test_", getpid(), "_", strategy, "_", absl::StrJoin(c.nodes, ""),
                   c.adamw, c.opts.size()),
      [&](int rank, CommGroups& g) { return TrainRank(c, strategy, data, rank, g, &params[rank]); });
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << strategy << " rank " << r << ": " << statuses[r];
  }
  return params;
}

class ZeroLayoutEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroLayoutEquivalence, EndsEqualToAllreduce) {
  const Case c = GetParam();
  const Data data = sync_testing::MakeSyntheticData(*nn::ParseModelSpec(kMlp),
                                                    kSteps * static_cast<int>(c.nodes.size()) * kBatch);
  const auto reference = RunLayout(c, "allreduce", data);
  const auto zero = RunLayout(c, c.strategy, data);
  ASSERT_FALSE(reference[0].empty());
  ASSERT_FALSE(zero[0].empty());
  const double diff = sync_testing::RelativeDifference(zero[0], reference[0]);
  std::printf("%s: relative difference to allreduce %.3g\n", CaseName({c, 0}).c_str(), diff);
  EXPECT_LE(diff, 1e-5);
  if (c.exact) EXPECT_EQ(zero[0], reference[0]) << "one node: bit for bit the shm allreduce";
  for (size_t r = 1; r < zero.size(); ++r) EXPECT_EQ(zero[r], zero[0]) << "rank " << r;
}

// gather_mb tiny: many rounds of a few floats per shard, so layers wait for
// different rounds; default: one round of the whole small model. zero3:
// by default (group_mb=4) the small model is one gather group (on one node
// every layer alone, whatever group_mb says); group_mb=0
// gathers every layer alone, 0.002 (524 floats) in two groups, with
// gather_mb 0.0005 the allgather in rounds of a few floats per piece. At 2x2 the
// zero1/zero2 rounds go in two levels (zero_sync.h), also at the end of the
// step (overlap=0, rounds of bucket_cap_mb: several here). On one node
// (aaaa, aaa) every bucket (several here) is reduce-scattered and the
// slices gathered in one collective by shm pieces (one_node_pieces.h).
INSTANTIATE_TEST_SUITE_P(
    Layouts, ZeroLayoutEquivalence,
    ::testing::Values(Case{"zero1", {"a", "a", "a", "a"}, false, "", true},
                      Case{"zero2", {"a", "a", "a", "a"}, false, "", true},
                      Case{"zero2", {"a", "a", "a", "a"}, true, "overlap=0", true},
                      Case{"zero2", {"a", "a", "a"}, true, "", true},
                      Case{"zero2", {"a", "a", "b", "b"}, true},
                      Case{"zero2", {"a", "b", "c", "d"}, false, "gather_mb=0.0001"},
                      Case{"zero2", {"a", "b", "c"}, true},
                      Case{"zero1", {"a", "a", "b"}, false, "gather_mb=0.0001"},
                      Case{"zero2", {"a", "a", "b", "b"}, false, "gather_mb=0.0001"},
                      Case{"zero1", {"a", "a", "b", "b"}, true, "overlap=0"},
                      Case{"zero3", {"a", "a", "b", "b"}, true},
                      Case{"zero3", {"a", "b", "c", "d"}, false},
                      Case{"zero3", {"a", "b", "c"}, true},
                      Case{"zero3", {"a", "a", "b"}, false},
                      Case{"zero3", {"a", "a", "a", "a"}, true, "", true},
                      Case{"zero3", {"a", "b", "c", "d"}, true, "group_mb=0"},
                      Case{"zero3", {"a", "a", "b", "b"}, false, "group_mb=0"},
                      Case{"zero3", {"a", "b", "c"}, false, "group_mb=0.002,gather_mb=0.0005"},
                      Case{"zero3", {"a", "b", "c", "d"}, false, "group_mb=0.002,gather_mb=0.0005"},
                      Case{"zero3", {"a", "a", "b", "b"}, true, "group_mb=0.002"},
                      Case{"zero3", {"a", "a", "b"}, true, "group_mb=0.002"}),
    CaseName);

}  // namespace
}  // namespace sync
}  // namespace tandem
