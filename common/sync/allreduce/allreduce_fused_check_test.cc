// The allreduce strategy's non-finite check fused into the shm reduce
// (Communicator::AllReduceSumOfSquares): three ranks on ShmCommunicators,
// SGD with momentum (the MLP's optimizer), several buckets. Against the same
// shm sums behind a communicator that does not fuse (the one-pass check):
// the same parameters and momentum bit for bit, the same skip verdict and
// bad range, and a grad_sum_sq equal to the one-pass sum within rounding and
// the same on every rank. Clipping and steps without a check keep the plain
// allreduce.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/comm/testing/gloo_ranks.h"
#include "common/comm/testing/rank_threads.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int kWorld = 3;
constexpr int64_t kSize = 3000;
// Backward order: [1800, 3000) is the output layer, [0, 750) the input layer.
const std::vector<std::pair<int64_t, int64_t>> kRanges = {{1800, 3000}, {750, 1800}, {0, 750}};

// The shm communicator, saying it fuses or not (`fuse` false: the sync
// takes the one-pass check), counting which allreduce the sync called.
class CountingComm final : public comm_testing::BorrowedCommunicator {
 public:
  CountingComm(Communicator* c, bool fuse) : BorrowedCommunicator(c), fuse_(fuse) {}
  bool fuses_sum_of_squares() const override { return fuse_; }
  absl::Status AllReduceSumOfSquares(float* d, int64_t n, double* sum_sq) override {
    ++fused_calls;
    return BorrowedCommunicator::AllReduceSumOfSquares(d, n, sum_sq);
  }
  absl::Status AllReduce(float* d, int64_t n, ReduceOp op) override {
    ++plain_calls;
    return BorrowedCommunicator::AllReduce(d, n, op);
  }

  int fused_calls = 0;
  int plain_calls = 0;

 private:
  bool fuse_;
};

struct Rank {
  std::vector<float> params = std::vector<float>(kSize);
  std::vector<float> grads = std::vector<float>(kSize);
  std::unique_ptr<CountingComm> comm;
  std::unique_ptr<GradientSync> sync;
  std::vector<StepReport> reports;
  std::vector<float> momentum;  // the optimizer's buffer after the last step
};

struct Training {
  bool fuse = true;
  double max_grad_norm = 0;
  bool skip_non_finite = true;
  std::vector<int> poisoned_steps;  // steps (1-based) with a NaN on rank 1, an inf on rank 2
  int steps = 3;
};

absl::Status Step(Rank& r, int rank, int step, const Training& run) {
  for (int64_t i = 0; i < kSize; ++i) {
    r.grads[i] = std::sin(0.37f * static_cast<float>(i + 13 * rank + 101 * step)) * 1.7f;
  }
  for (int p : run.poisoned_steps) {
    if (p != step) continue;
    if (rank == 1) r.grads[100] = std::nanf("");                            // input layer
    if (rank == 2) r.grads[2000] = std::numeric_limits<float>::infinity();  // output layer
  }
  StepOptions o;
  o.skip_non_finite = run.skip_non_finite;
  o.grad_scale = 0.5f;
  RETURN_IF_ERROR(r.sync->BeginStep(o));
  for (const auto& [lo, hi] : kRanges) r.sync->OnGradientsReady(lo, hi);
  optim::StepContext ctx;
  ctx.step = step;
  ctx.lr = 0.05f;
  RETURN_IF_ERROR(r.sync->FinishStep(ctx));
  r.reports.push_back(r.sync->last_step());
  return absl::OkStatus();
}

std::vector<Rank> Train(const Training& run) {
  std::vector<Rank> ranks(kWorld);
  auto statuses = comm_testing::RunRanks(
      kWorld,
      [](int rank,
         gloo::rendezvous::Store& store) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        ShmOptions o;
        o.rank = rank;
        o.world_size = kWorld;
        o.store = &store;
        o.prefix = "test/fused";
        o.chunk_bytes = 4096;  // several chunks per bucket
        return ShmCommunicator::Create(o);
      },
      [&](int rank, Communicator& shm) -> absl::Status {
        Rank& r = ranks[rank];
        for (int64_t i = 0; i < kSize; ++i) r.params[i] = 0.001f * static_cast<float>(i % 97);
        r.comm = std::make_unique<CountingComm>(&shm, run.fuse);
        AllreduceSyncOptions o;
        o.comm = r.comm.get();
        o.params = r.params.data();
        o.grads = r.grads.data();
        o.size = kSize;
        o.ready_ranges = kRanges;
        o.bucket_cap_mb = 4000.0 / (1 << 20);  // ~1000 floats: one bucket per range
        o.max_grad_norm = run.max_grad_norm;
        ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, kSize}, {/*momentum=*/0.9f}));
        ASSIGN_OR_RETURN(r.sync, CreateAllreduceSync(std::move(o)));
        for (int s = 1; s <= run.steps; ++s) RETURN_IF_ERROR(Step(r, rank, s, run));
        const optim::StateBuffer b = r.sync->optimizer()->state().at(0);
        r.momentum.assign(b.data.begin(), b.data.end());
        r.sync.reset();  // its thread stops before the communicator goes
        return absl::OkStatus();
      });
  for (int k = 0; k < kWorld; ++k) EXPECT_TRUE(statuses[k].ok()) << statuses[k];
  return ranks;
}

void ExpectSameTraining(const std::vector<Rank>& fused, const std::vector<Rank>& plain) {
  for (int k = 0; k < kWorld; ++k) {
    SCOPED_TRACE(absl::StrCat("rank ", k));
    ASSERT_EQ(fused[k].reports.size(), plain[k].reports.size());
    EXPECT_EQ(fused[k].params, plain[k].params);  // bit for bit
    for (size_t s = 0; s < fused[k].reports.size(); ++s) {
      const StepReport& f = fused[k].reports[s];
      const StepReport& p = plain[k].reports[s];
      EXPECT_EQ(f.applied, p.applied) << "step " << s + 1;
      EXPECT_EQ(f.first_non_finite_range, p.first_non_finite_range) << "step " << s + 1;
      if (std::isfinite(p.grad_sum_sq)) {
        EXPECT_EQ(f.grad_sum_sq, fused[0].reports[s].grad_sum_sq) << "ranks disagree";
        EXPECT_NEAR(f.grad_sum_sq, p.grad_sum_sq, 1e-12 * p.grad_sum_sq) << "step " << s + 1;
      } else {
        EXPECT_FALSE(std::isfinite(f.grad_sum_sq)) << "step " << s + 1;
      }
    }
  }
}

TEST(AllreduceFusedCheck, FiniteStepsMatchTheOnePassCheckBitForBit) {
  const std::vector<Rank> fused = Train({});
  Training plain_run;
  plain_run.fuse = false;
  const std::vector<Rank> plain = Train(plain_run);
  ExpectSameTraining(fused, plain);
  for (int k = 0; k < kWorld; ++k) {
    EXPECT_EQ(fused[k].momentum, plain[k].momentum);
    for (const StepReport& r : fused[k].reports) EXPECT_TRUE(r.applied);
    EXPECT_EQ(fused[k].comm->plain_calls, 0);
    EXPECT_EQ(fused[k].comm->fused_calls, 3 * 3);  // 3 buckets, 3 steps
    EXPECT_EQ(plain[k].comm->fused_calls, 0);
  }
}

TEST(AllreduceFusedCheck, NonFiniteStepIsSkippedOnEveryRankAndNamesTheSameRange) {
  Training run;
  run.poisoned_steps = {2};
  const std::vector<Rank> fused = Train(run);
  run.fuse = false;
  const std::vector<Rank> plain = Train(run);
  ExpectSameTraining(fused, plain);
  for (int k = 0; k < kWorld; ++k) {
    SCOPED_TRACE(absl::StrCat("rank ", k));
    ASSERT_EQ(fused[k].reports.size(), 3u);
    EXPECT_TRUE(fused[k].reports[0].applied);
    EXPECT_FALSE(fused[k].reports[1].applied);
    EXPECT_EQ(fused[k].reports[1].first_non_finite_range,
              2);  // [0, 750): rank 1's NaN
    EXPECT_TRUE(fused[k].reports[2].applied);
    EXPECT_EQ(fused[k].momentum, plain[k].momentum);
  }
}

TEST(AllreduceFusedCheck, ClippingAndUncheckedStepsKeepThePlainAllreduce) {
  Training clipped;
  clipped.max_grad_norm = 1.0;  // the norm scales the update: the one-pass sum
  Training unchecked;
  unchecked.skip_non_finite = false;
  for (const Training& run : {clipped, unchecked}) {
    const std::vector<Rank> ranks = Train(run);
    for (int k = 0; k < kWorld; ++k) {
      EXPECT_EQ(ranks[k].comm->fused_calls, 0);
      EXPECT_EQ(ranks[k].comm->plain_calls, 3 * 3);
    }
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
