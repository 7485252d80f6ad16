// Skipping a step with non-finite gradients (StepOptions::skip_non_finite),
// for every strategy that steps on the workers: a NaN on one rank and an
// inf on another make every rank skip the same step and name the same
// range (the one nearest the input); parameters and optimizer state stay
// bit for bit what they were; the next finite step gives exactly what a
// run without the bad step gives. ps and hybrid reject the option (their
// tests live with them). And the loss scale changing between steps:
// compressed's residuals follow it.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/groups.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "common/sync/testing/synthetic_training.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int kWorld = 3;
constexpr int64_t kSize = 1000;
// Backward order: [600, 1000) is the output layer, [0, 250) the input layer.
const std::vector<std::pair<int64_t, int64_t>> kRanges = {
    {600, 1000}, {250, 600}, {0, 250}};

struct Case {
  std::string strategy;
  std::string sync_opt;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.strategy + (info.param.sync_opt.empty() ? "" : "_") +
                  info.param.sync_opt;
  for (char& c : n) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

struct Rank {
  std::vector<float> params = std::vector<float>(kSize);
  std::vector<float> grads = std::vector<float>(kSize);
  CommGroups groups;
  std::unique_ptr<GradientSync> sync;
};

absl::Status SetUpRank(const Case& c, Communicator& comm, Rank* r) {
  for (int64_t i = 0; i < kSize; ++i) r->params[i] = 0.001f * static_cast<float>(i % 97) - 0.05f;
  r->groups.world = std::make_unique<comm_testing::BorrowedCommunicator>(&comm);
  ASSIGN_OR_RETURN(SyncOptions so, ParseSyncOptions(c.strategy, c.sync_opt));
  so.bucket_cap_mb = 0.001;  // a few buckets
  SyncEnv env;
  env.comms = &r->groups;
  env.params = r->params.data();
  env.grads = r->grads.data();
  env.size = kSize;
  env.ready_ranges = kRanges;
  env.make_optimizer = [](optim::ParamRange range) {
    return sync_testing::MakeTestOptimizer(/*adamw=*/true, range);
  };
  ASSIGN_OR_RETURN(r->sync, CreateGradientSync(so, std::move(env)));
  return absl::OkStatus();
}

// One step of seeded gradients times `loss_scale`, unscaled by grad_scale.
absl::Status Step(Rank& r, int rank, int seed, bool poison, float loss_scale = 1.f) {
  for (int64_t i = 0; i < kSize; ++i) {
    r.grads[i] = loss_scale * std::sin(0.37f * static_cast<float>(i + 13 * rank + 101 * seed));
  }
  if (poison && rank == 1) r.grads[100] = std::nanf("");                          // input layer
  if (poison && rank == 2) r.grads[700] = std::numeric_limits<float>::infinity();  // output
  StepOptions o;
  o.skip_non_finite = true;
  o.grad_scale = 1.f / loss_scale;
  RETURN_IF_ERROR(r.sync->BeginStep(o));
  for (const auto& [lo, hi] : kRanges) r.sync->OnGradientsReady(lo, hi);
  return r.sync->FinishStep(sync_testing::TestStepContext(/*adamw=*/true, 1));
}

std::vector<float> OptimizerState(GradientSync& s) {
  std::vector<float> out;
  for (const optim::StateBuffer& b : s.optimizer()->state()) {
    out.insert(out.end(), b.data.begin(), b.data.end());
  }
  return out;
}

class NonFiniteSkip : public ::testing::TestWithParam<Case> {};

TEST_P(NonFiniteSkip, EveryRankSkipsTheSameStepAndTheNextOneIsUnaffected) {
  const Case c = GetParam();
  std::vector<Rank> ranks(kWorld), reference(kWorld);
  std::vector<StepReport> bad(kWorld), good(kWorld);
  std::vector<bool> params_kept(kWorld), state_kept(kWorld);
  auto statuses = comm_testing::RunGlooRanks(kWorld, [&](int rank, Communicator& comm) {
    Rank& r = ranks[rank];
    RETURN_IF_ERROR(SetUpRank(c, comm, &r));
    const std::vector<float> params0 = r.params;
    const std::vector<float> state0 = OptimizerState(*r.sync);
    RETURN_IF_ERROR(Step(r, rank, /*seed=*/1, /*poison=*/true));
    bad[rank] = r.sync->last_step();
    params_kept[rank] = r.params == params0;
    state_kept[rank] = OptimizerState(*r.sync) == state0;
    RETURN_IF_ERROR(Step(r, rank, /*seed=*/2, /*poison=*/false));
    good[rank] = r.sync->last_step();
    return absl::OkStatus();
  });
  for (int k = 0; k < kWorld; ++k) ASSERT_TRUE(statuses[k].ok()) << statuses[k];
  statuses = comm_testing::RunGlooRanks(kWorld, [&](int rank, Communicator& comm) {
    RETURN_IF_ERROR(SetUpRank(c, comm, &reference[rank]));
    return Step(reference[rank], rank, /*seed=*/2, /*poison=*/false);
  });
  for (int k = 0; k < kWorld; ++k) ASSERT_TRUE(statuses[k].ok()) << statuses[k];
  for (int k = 0; k < kWorld; ++k) {
    SCOPED_TRACE(absl::StrCat("rank ", k));
    EXPECT_FALSE(bad[k].applied);
    EXPECT_EQ(bad[k].first_non_finite_range, 2);  // [0, 250): rank 1's NaN
    EXPECT_TRUE(params_kept[k]);
    EXPECT_TRUE(state_kept[k]);
    EXPECT_TRUE(good[k].applied);
    EXPECT_EQ(good[k].first_non_finite_range, -1);
    EXPECT_TRUE(std::isfinite(good[k].grad_sum_sq));
    EXPECT_EQ(good[k].grad_sum_sq, good[0].grad_sum_sq);
    EXPECT_EQ(good[k].grad_sum_sq, reference[k].sync->last_step().grad_sum_sq);
    // Bit for bit the run that never saw the bad step.
    EXPECT_EQ(ranks[k].params, reference[k].params);
    EXPECT_EQ(OptimizerState(*ranks[k].sync), OptimizerState(*reference[k].sync));
    EXPECT_NE(ranks[k].params, ranks[k].grads);  // (a step was taken)
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, NonFiniteSkip,
                         ::testing::Values(Case{"allreduce", ""}, Case{"zero1", ""},
                                           Case{"zero2", ""}, Case{"compressed", "codec=int8"},
                                           Case{"compressed", "codec=topk,k=0.1,warmup_steps=0,momentum_correction=0"}),
                         CaseName);

// fp16's loss scale changing between steps: compressed's error-feedback
// residuals follow it, so step 2 at scale 4 (gradients 4x, grad_scale 1/4)
// gives bit for bit what step 2 at scale 1 gives.
TEST(LossScaleChange, CompressedResidualsFollowTheScale) {
  for (const char* codec : {"codec=int8", "codec=threshold,density=0.1,warmup_steps=0,momentum_correction=0"}) {
    SCOPED_TRACE(codec);
    std::vector<Rank> scaled(kWorld), plain(kWorld);
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<Rank>& ranks = variant == 0 ? scaled : plain;
      auto statuses = comm_testing::RunGlooRanks(kWorld, [&](int rank, Communicator& comm) {
        RETURN_IF_ERROR(SetUpRank(Case{"compressed", codec}, comm, &ranks[rank]));
        RETURN_IF_ERROR(Step(ranks[rank], rank, 1, false));
        return Step(ranks[rank], rank, 2, false, variant == 0 ? 4.f : 1.f);
      });
      for (int k = 0; k < kWorld; ++k) ASSERT_TRUE(statuses[k].ok()) << statuses[k];
    }
    for (int k = 0; k < kWorld; ++k) {
      EXPECT_EQ(scaled[k].params, plain[k].params) << "rank " << k;
      EXPECT_NEAR(scaled[k].sync->stats().residual_norm, 4 * plain[k].sync->stats().residual_norm,
                  1e-6 * plain[k].sync->stats().residual_norm);
    }
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
