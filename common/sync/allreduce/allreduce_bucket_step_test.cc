// AllreduceSync's per-bucket step (step_per_bucket, allreduce_sync.h) on
// two Gloo ranks (a thread each): the parameters and optimizer state after
// several steps are bit-identical to the whole-vector step for SGD, SGD
// with momentum, Nesterov and AdamW (with weight decay, accumulation and
// loss-scale factors); buckets really are stepped before the next bucket's
// allreduce starts; clipping, skip_non_finite and measure_grad_norm take the
// whole-vector path and stay right; a FinishStep context other than the one
// BeginStep was given is an error; a failed collective after per-bucket
// stepping began reports partially_updated().
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/testing/gloo_ranks.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int64_t kSize = 1000;
constexpr int kSteps = 4;
// Backward order; with a 400-float cap the plan has three buckets.
const std::vector<std::pair<int64_t, int64_t>> kRanges = {
    {700, 1000}, {300, 700}, {100, 300}, {0, 100}};

// Forwards to a rank's Gloo communicator; before each AllReduce records how
// many parameters already differ from their values at the step's start
// (the communication thread runs both the step of a bucket and the next
// bucket's allreduce, so this reads what the previous buckets left).
class ObservingCommunicator final : public Communicator {
 public:
  ObservingCommunicator(Communicator* inner, const std::vector<float>* params)
      : inner_(inner), params_(params) {
    changed_.reserve(64);
  }
  // Trainer thread, before BeginStep.
  void StartStep() {
    start_ = *params_;
    changed_.clear();
  }
  // After FinishStep.
  const std::vector<int64_t>& changed() const { return changed_; }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend() const override { return inner_->backend(); }
  absl::Status AllReduce(float* d, int64_t n, ReduceOp op) override {
    int64_t changed = 0;
    for (size_t i = 0; i < start_.size(); ++i) changed += (*params_)[i] != start_[i];
    changed_.push_back(changed);
    return inner_->AllReduce(d, n, op);
  }
  absl::Status ReduceScatter(const float* in, float* out, int64_t n) override {
    return inner_->ReduceScatter(in, out, n);
  }
  absl::Status AllGather(const void* in, void* out, int64_t b) override {
    return inner_->AllGather(in, out, b);
  }
  absl::Status Broadcast(void* d, int64_t b, int root) override {
    return inner_->Broadcast(d, b, root);
  }
  absl::Status AllToAll(const void* in, void* out, int64_t b) override {
    return inner_->AllToAll(in, out, b);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }

 private:
  Communicator* const inner_;
  const std::vector<float>* const params_;
  std::vector<float> start_;
  std::vector<int64_t> changed_;
};

enum class Opt { kSgd, kMomentum, kNesterov, kAdamW };

struct Config {
  Opt opt = Opt::kAdamW;
  bool per_bucket = true;    // AllreduceSyncOptions::step_per_bucket
  bool give_context = true;  // StepOptions::context
  double max_grad_norm = 0;
  bool skip_non_finite = false;
  bool measure_grad_norm = false;
  bool nan_at_step_2 = false;  // rank 1's gradients at step 2
};

struct Result {
  std::vector<float> params;
  std::vector<std::vector<float>> state;
  std::vector<std::vector<int64_t>> changed;  // per step, per allreduce
  std::vector<StepReport> reports;
};

std::unique_ptr<optim::Optimizer> MakeOptimizer(Opt opt) {
  if (opt == Opt::kAdamW) {
    optim::AdamWOptions a;
    a.weight_decay = 0.1f;
    return std::move(*optim::AdamW::Create({0, kSize}, a));
  }
  optim::SgdOptions s;
  s.momentum = opt == Opt::kSgd ? 0.f : 0.9f;
  s.nesterov = opt == Opt::kNesterov;
  s.weight_decay = 0.01f;
  return std::move(*optim::Sgd::Create({0, kSize}, s));
}

// Different on every rank and step; values of both signs and many scales.
void FillGradients(std::vector<float>& g, int rank, int step) {
  for (int64_t i = 0; i < kSize; ++i) {
    g[i] = std::sin(0.37f * i + 1.3f * step + 2.1f * rank) * (1.f + 0.01f * (i % 97));
  }
}

absl::StatusOr<Result> Train(Communicator& gloo, const Config& s) {
  Result r;
  r.params.resize(kSize);
  for (int64_t i = 0; i < kSize; ++i) r.params[i] = std::cos(0.11f * i);
  std::vector<float> grads(kSize);
  ObservingCommunicator comm(&gloo, &r.params);
  AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = r.params.data();
  o.grads = grads.data();
  o.size = kSize;
  o.ready_ranges = kRanges;
  o.bucket_cap_mb = 400 * sizeof(float) / (1024.0 * 1024.0);
  o.max_grad_norm = s.max_grad_norm;
  o.step_per_bucket = s.per_bucket;
  o.optimizer = MakeOptimizer(s.opt);
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateAllreduceSync(std::move(o)));
  for (int step = 1; step <= kSteps; ++step) {
    FillGradients(grads, comm.rank(), step);
    if (s.nan_at_step_2 && step == 2 && comm.rank() == 1) grads[150] = std::nanf("");
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = 0.01f * step;
    ctx.grad_scale = 0.25f;  // e.g. 1 / loss scale
    StepOptions so;
    so.grad_scale = 0.5f;  // e.g. two accumulated micro-batches
    so.skip_non_finite = s.skip_non_finite;
    so.measure_grad_norm = s.measure_grad_norm;
    if (s.give_context) so.context = ctx;
    comm.StartStep();
    RETURN_IF_ERROR(sync->BeginStep(so));
    for (const auto& range : kRanges) sync->OnGradientsReady(range.first, range.second);
    RETURN_IF_ERROR(sync->FinishStep(ctx));
    r.changed.push_back(comm.changed());
    r.reports.push_back(sync->last_step());
  }
  for (const optim::StateBuffer& b : sync->optimizer()->state()) {
    r.state.emplace_back(b.data.begin(), b.data.end());
  }
  return r;
}

// Both ranks' results of `s` (asserting both ranks succeeded and agree).
std::vector<Result> TrainOnTwoRanks(const Config& s) {
  std::vector<Result> out(2);
  auto statuses = comm_testing::RunGlooRanks(2, [&](int rank, Communicator& c) {
    ASSIGN_OR_RETURN(out[rank], Train(c, s));
    return absl::OkStatus();
  });
  for (const absl::Status& st : statuses) EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].params, out[1].params) << "ranks must agree";
  return out;
}

class BucketStepBits : public ::testing::TestWithParam<Opt> {};

TEST_P(BucketStepBits, MatchesTheWholeVectorStepBitForBit) {
  Config per_bucket;
  per_bucket.opt = GetParam();
  Config whole = per_bucket;
  whole.per_bucket = false;
  const std::vector<Result> a = TrainOnTwoRanks(per_bucket);
  const std::vector<Result> b = TrainOnTwoRanks(whole);
  // Exact equality (no NaN here): the same bits, not merely close.
  EXPECT_EQ(a[0].params, b[0].params);
  EXPECT_EQ(a[0].state, b[0].state);
  EXPECT_NE(a[0].params[0], std::cos(0.f)) << "the steps must have moved the parameters";
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<int64_t>& on = a[0].changed[step];
    ASSERT_EQ(on.size(), 3u) << "three buckets";
    // The first bucket ([700, 1000)) is stepped before the second's
    // allreduce begins, the second before the third's.
    // (A parameter whose update is below its rounding may stay put.)
    EXPECT_EQ(on[0], 0);
    EXPECT_GT(on[1], 250);
    EXPECT_LE(on[1], 300);
    EXPECT_GT(on[2], on[1] + 350);
    EXPECT_LE(on[2], 700);
    EXPECT_EQ(b[0].changed[step], std::vector<int64_t>(3, 0)) << "step_per_bucket off";
  }
}

std::string OptName(const ::testing::TestParamInfo<Opt>& info) {
  static const char* const kNames[] = {"sgd", "momentum", "nesterov", "adamw"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Optimizers, BucketStepBits,
                         ::testing::Values(Opt::kSgd, Opt::kMomentum, Opt::kNesterov, Opt::kAdamW),
                         OptName);

// Nothing is stepped before FinishStep in every step of `r`.
void ExpectWholeVectorPath(const Result& r) {
  for (const std::vector<int64_t>& changed : r.changed) {
    for (int64_t c : changed) EXPECT_EQ(c, 0);
  }
}

TEST(BucketStep, WithoutAContextTheWholeVectorIsStepped) {
  Config s;
  s.give_context = false;
  ExpectWholeVectorPath(TrainOnTwoRanks(s)[0]);
}

TEST(BucketStep, ClippingNeedsTheGlobalNormFirstSoStepsTheWholeVector) {
  Config clipped;
  clipped.max_grad_norm = 0.5;  // far below the gradients' norm: clips every step
  Config clipped_off = clipped;
  clipped_off.per_bucket = false;
  Config unclipped;
  const std::vector<Result> a = TrainOnTwoRanks(clipped);
  const std::vector<Result> b = TrainOnTwoRanks(clipped_off);
  ExpectWholeVectorPath(a[0]);
  EXPECT_EQ(a[0].params, b[0].params);
  EXPECT_NE(a[0].params, TrainOnTwoRanks(unclipped)[0].params) << "the clip must have acted";
}

TEST(BucketStep, NonFiniteSkipStillLeavesEverythingUntouched) {
  Config s;
  s.skip_non_finite = true;
  s.nan_at_step_2 = true;
  Config off = s;
  off.per_bucket = false;
  const std::vector<Result> a = TrainOnTwoRanks(s);
  const std::vector<Result> b = TrainOnTwoRanks(off);
  ExpectWholeVectorPath(a[0]);
  EXPECT_FALSE(a[0].reports[1].applied);
  EXPECT_TRUE(a[0].reports[2].applied);
  EXPECT_EQ(a[0].params, b[0].params);
  EXPECT_EQ(a[0].state, b[0].state);
  for (float p : a[0].params) ASSERT_TRUE(std::isfinite(p));
}

TEST(BucketStep, MeasuringTheNormStepsTheWholeVector) {
  Config s;
  s.measure_grad_norm = true;
  const std::vector<Result> a = TrainOnTwoRanks(s);
  ExpectWholeVectorPath(a[0]);
  EXPECT_GT(a[0].reports[0].grad_sum_sq, 0);
}

// A plain-SGD sync over `params` / `grads` with one step begun (with `ctx`
// as StepOptions::context when give_context) and every range reported.
absl::StatusOr<std::unique_ptr<GradientSync>> StartSgdStep(Communicator& c,
                                                           std::vector<float>& params,
                                                           std::vector<float>& grads,
                                                           const optim::StepContext& ctx,
                                                           bool give_context) {
  AllreduceSyncOptions o;
  o.comm = &c;
  o.params = params.data();
  o.grads = grads.data();
  o.size = kSize;
  o.ready_ranges = kRanges;
  o.optimizer = MakeOptimizer(Opt::kSgd);
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateAllreduceSync(std::move(o)));
  StepOptions so;
  if (give_context) so.context = ctx;
  RETURN_IF_ERROR(sync->BeginStep(so));
  for (const auto& range : kRanges) sync->OnGradientsReady(range.first, range.second);
  return sync;
}

TEST(BucketStep, FinishStepWithAnotherContextIsAnError) {
  auto statuses = comm_testing::RunGlooRanks(2, [&](int rank, Communicator& c) {
    std::vector<float> params(kSize, 1.f), grads(kSize, 1.f);
    optim::StepContext ctx;
    ctx.lr = 0.1f;
    ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync,
                     StartSgdStep(c, params, grads, ctx, /*give_context=*/true));
    ctx.lr = 0.2f;
    const absl::Status s = sync->FinishStep(ctx);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("differs from StepOptions::context"), std::string::npos) << s;
    return absl::OkStatus();
  });
  for (const absl::Status& st : statuses) EXPECT_TRUE(st.ok()) << st;
}

// A peer leaves: FinishStep fails; with per-bucket stepping the rank says
// its state belongs to no step, without it the parameters are untouched.
TEST(BucketStep, FailedCollectiveAfterPerBucketSteppingIsAPartialUpdate) {
  for (const bool give_context : {true, false}) {
    bool partial = !give_context;
    auto statuses =
        comm_testing::RunGlooRanks(2, absl::Milliseconds(500), [&](int rank, Communicator& c) {
          RETURN_IF_ERROR(c.Barrier());
          if (rank == 1) return absl::OkStatus();  // leaves: its sockets close
          std::vector<float> params(kSize, 1.f), grads(kSize, 1.f);
          optim::StepContext ctx;
          ctx.lr = 0.1f;
          ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync,
                           StartSgdStep(c, params, grads, ctx, give_context));
          EXPECT_FALSE(sync->FinishStep(ctx).ok());
          partial = sync->partially_updated();
          if (!give_context) {
            EXPECT_EQ(params, std::vector<float>(kSize, 1.f));
          }
          return absl::OkStatus();
        });
    for (const absl::Status& st : statuses) EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(partial, give_context);
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
