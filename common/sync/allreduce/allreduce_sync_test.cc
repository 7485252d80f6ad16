// AllreduceSync against a scripted fake Communicator: overlap (a bucket's
// allreduce is issued while backward is still reporting ranges), the issue
// order, averaging and accumulation scaling, clipping, error paths and
// option validation. One process, no network.
#include "common/sync/allreduce/allreduce_sync.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/optim/sgd.h"
#include "gtest/gtest.h"

// Counts heap allocations made by any thread while enabled, to check that a
// step allocates nothing.
std::atomic<bool> g_count_allocations{false};
std::atomic<int64_t> g_allocations{0};
void* volatile g_sink = nullptr;

void* operator new(std::size_t n) {
  if (g_count_allocations.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace tandem {
namespace sync {
namespace {

// Pretends every peer holds the same data: AllReduce multiplies by the world
// size. Records each call; can fail the n-th call.
class FakeCommunicator final : public Communicator {
 public:
  explicit FakeCommunicator(int world_size, int fail_call = -1)
      : world_size_(world_size), fail_call_(fail_call) {
    calls_.reserve(1000);  // recording must not allocate (see NoAllocationPerStep)
  }

  int rank() const override { return 0; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "fake"; }

  absl::Status AllReduce(float* data, int64_t count, ReduceOp) override {
    // Lasts until the clock has visibly advanced, so comm time is measurable.
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() == start) {
    }
    absl::MutexLock lock(&mu_);
    const int call = static_cast<int>(calls_.size());
    calls_.push_back({data, count});
    if (call == fail_call_) {
      return absl::DeadlineExceededError("fake allreduce on rank 0 timed out");
    }
    for (int64_t i = 0; i < count; ++i) data[i] *= world_size_;
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(const float*, float*, int64_t) override { return Unused(); }
  absl::Status AllGather(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Broadcast(void*, int64_t, int) override { return Unused(); }
  absl::Status AllToAll(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }

  // Blocks until at least n AllReduce calls were made (true) or a generous
  // deadline passes (false: the test fails instead of hanging).
  bool WaitForCalls(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(calls_.size()) >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }

  std::vector<std::pair<float*, int64_t>> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not used by allreduce sync"); }

  const int world_size_;
  const int fail_call_;
  absl::Mutex mu_;
  std::vector<std::pair<float*, int64_t>> calls_ ABSL_GUARDED_BY(mu_);
};

constexpr int64_t kSize = 40;
// Backward order: last layer first, as nn::GroupRanges of a model whose
// layout is in backward order would give in reverse; any tiling works.
const std::vector<std::pair<int64_t, int64_t>> kRanges = {{30, 40}, {20, 30}, {10, 20}, {0, 10}};

struct Fixture {
  std::vector<float> params = std::vector<float>(kSize, 0.f);
  std::vector<float> grads = std::vector<float>(kSize, 0.f);
  std::unique_ptr<GradientSync> sync;
};

// Plain SGD with lr 1 (set per step), so params become -(applied gradient).
std::unique_ptr<GradientSync> MakeSync(Fixture& f, Communicator* comm, double cap_floats,
                                       double max_grad_norm = 0) {
  AllreduceSyncOptions o;
  o.comm = comm;
  o.params = f.params.data();
  o.grads = f.grads.data();
  o.size = kSize;
  o.ready_ranges = kRanges;
  o.bucket_cap_mb = cap_floats * sizeof(float) / (1024.0 * 1024.0);
  o.max_grad_norm = max_grad_norm;
  auto opt = optim::Sgd::Create({0, kSize}, optim::SgdOptions());
  EXPECT_TRUE(opt.ok());
  o.optimizer = std::move(*opt);
  auto sync = CreateAllreduceSync(std::move(o));
  EXPECT_TRUE(sync.ok()) << sync.status();
  return sync.ok() ? std::move(*sync) : nullptr;
}

optim::StepContext Lr1() {
  optim::StepContext ctx;
  ctx.step = 1;
  ctx.lr = 1.f;
  return ctx;
}

TEST(AllreduceSync, FirstBucketIsIssuedBeforeBackwardReportsTheLastRange) {
  Fixture f;
  FakeCommunicator comm(1);
  auto sync = MakeSync(f, &comm, 10);  // one range per bucket
  ASSERT_NE(sync, nullptr);
  ASSERT_TRUE(sync->BeginStep({}).ok());
  sync->OnGradientsReady(30, 40);
  // The communication thread must issue bucket 1 now, while "backward" (this
  // thread) has three ranges still to report.
  ASSERT_TRUE(comm.WaitForCalls(1)) << "first bucket never issued before the last range";
  EXPECT_EQ(comm.calls()[0].first, f.grads.data() + 30);
  EXPECT_EQ(comm.calls()[0].second, 10);
  sync->OnGradientsReady(20, 30);
  sync->OnGradientsReady(10, 20);
  sync->OnGradientsReady(0, 10);
  ASSERT_TRUE(sync->FinishStep(Lr1()).ok());
  const auto calls = comm.calls();
  ASSERT_EQ(calls.size(), 4u);
  for (int b = 0; b < 4; ++b) {  // plan order, in place on the flat grads
    EXPECT_EQ(calls[b].first, f.grads.data() + kRanges[b].first);
    EXPECT_EQ(calls[b].second, 10);
  }
}

TEST(AllreduceSync, RangesArrivingOutOfOrderAreStillIssuedInPlanOrder) {
  Fixture f;
  FakeCommunicator comm(1);
  auto sync = MakeSync(f, &comm, 10);
  ASSERT_NE(sync, nullptr);
  ASSERT_TRUE(sync->BeginStep({}).ok());
  sync->OnGradientsReady(0, 10);
  sync->OnGradientsReady(10, 20);
  sync->OnGradientsReady(30, 40);
  sync->OnGradientsReady(20, 30);
  ASSERT_TRUE(sync->FinishStep(Lr1()).ok());
  const auto calls = comm.calls();
  ASSERT_EQ(calls.size(), 4u);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(calls[b].first, f.grads.data() + kRanges[b].first);
}

TEST(AllreduceSync, AveragesOverRanksAndAppliesGradScaleOverSteps) {
  Fixture f;
  FakeCommunicator comm(2);            // the "other rank" has the same gradients
  auto sync = MakeSync(f, &comm, 20);  // two ranges per bucket
  ASSERT_NE(sync, nullptr);
  double finish_wall = 0;
  const auto begin = std::chrono::steady_clock::now();
  for (int step = 1; step <= 3; ++step) {
    for (int64_t i = 0; i < kSize; ++i) f.grads[i] = static_cast<float>(i % 5) - 2.f;
    StepOptions so;
    so.grad_scale = 0.5f;  // two accumulated micro-batches
    ASSERT_TRUE(sync->BeginStep(so).ok());
    for (const auto& [lo, hi] : kRanges) sync->OnGradientsReady(lo, hi);
    optim::StepContext ctx = Lr1();
    ctx.step = step;
    const auto t = std::chrono::steady_clock::now();
    ASSERT_TRUE(sync->FinishStep(ctx).ok());
    finish_wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  const double total_wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  // Each step applies g * 2 (sum) * 0.5 (grad_scale) / 2 (world) = 0.5 g.
  for (int64_t i = 0; i < kSize; ++i) {
    EXPECT_EQ(f.params[i], -1.5f * (static_cast<float>(i % 5) - 2.f)) << i;
  }
  const SyncStats stats = sync->stats();
  EXPECT_EQ(stats.steps, 3);
  EXPECT_EQ(stats.buckets, 6);
  EXPECT_EQ(stats.bytes_sent, 3 * kSize * 4);
  EXPECT_GT(stats.comm_seconds, 0);  // every fake allreduce outlasts a clock tick
  EXPECT_LE(stats.comm_seconds, total_wall);
  // Waiting and stepping both happen inside FinishStep, so together they
  // cannot exceed the time spent in it.
  EXPECT_GT(stats.optimizer_seconds, 0);
  EXPECT_LE(stats.exposed_wait_seconds + stats.optimizer_seconds, finish_wall);
}

TEST(AllreduceSync, NoAllocationPerStep) {
  Fixture f;
  FakeCommunicator comm(2);
  auto sync = MakeSync(f, &comm, 10, /*max_grad_norm=*/100.0);
  ASSERT_NE(sync, nullptr);
  auto step = [&](int n) {
    bool ok = sync->BeginStep({}).ok();
    for (const auto& [lo, hi] : kRanges) sync->OnGradientsReady(lo, hi);
    optim::StepContext ctx = Lr1();
    ctx.step = n;
    return sync->FinishStep(ctx).ok() && ok;
  };
  ASSERT_TRUE(step(1));  // warm-up: per-thread state of the mutex
  g_allocations = 0;
  g_count_allocations = true;
  g_sink = new int(1);  // the counter itself works
  delete static_cast<int*>(g_sink);
  EXPECT_EQ(g_allocations.exchange(0), 1);
  bool ok = true;
  for (int n = 2; n <= 5; ++n) ok = step(n) && ok;
  g_count_allocations = false;
  EXPECT_TRUE(ok);
  EXPECT_EQ(g_allocations.load(), 0);
}

TEST(AllreduceSync, ClipsByTheGlobalNormOfTheAveragedGradient) {
  Fixture f;
  FakeCommunicator comm(1);
  auto sync = MakeSync(f, &comm, 1000, /*max_grad_norm=*/1.0);
  ASSERT_NE(sync, nullptr);
  f.grads[3] = 3.f;
  f.grads[37] = 4.f;  // norm 5
  ASSERT_TRUE(sync->BeginStep({}).ok());
  for (const auto& [lo, hi] : kRanges) sync->OnGradientsReady(lo, hi);
  ASSERT_TRUE(sync->FinishStep(Lr1()).ok());
  EXPECT_NEAR(f.params[3], -0.6f, 1e-6);
  EXPECT_NEAR(f.params[37], -0.8f, 1e-6);
  EXPECT_EQ(f.params[0], 0.f);
}

TEST(AllreduceSync, FailedCollectiveIsReturnedAndNothingIsApplied) {
  Fixture f;
  FakeCommunicator comm(2, /*fail_call=*/1);
  auto sync = MakeSync(f, &comm, 10);
  ASSERT_NE(sync, nullptr);
  std::fill(f.grads.begin(), f.grads.end(), 1.f);
  ASSERT_TRUE(sync->BeginStep({}).ok());
  for (const auto& [lo, hi] : kRanges) sync->OnGradientsReady(lo, hi);
  absl::Status s = sync->FinishStep(Lr1());
  ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("allreduce of bucket 2 of 4"), std::string::npos) << s;
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s;
  for (float p : f.params) ASSERT_EQ(p, 0.f);
  EXPECT_EQ(comm.calls().size(), 2u);  // nothing issued after the failure
  EXPECT_EQ(sync->BeginStep({}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AllreduceSync, MissingUnknownAndRepeatedRangesAreErrorsNotHangs) {
  {
    Fixture f;
    FakeCommunicator comm(1);
    auto sync = MakeSync(f, &comm, 10);
    ASSERT_TRUE(sync->BeginStep({}).ok());
    sync->OnGradientsReady(30, 40);
    sync->OnGradientsReady(20, 30);  // two ranges never reported
    absl::Status s = sync->FinishStep(Lr1());
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("only 2 of 4"), std::string::npos) << s;
  }
  {
    Fixture f;
    FakeCommunicator comm(1);
    auto sync = MakeSync(f, &comm, 10);
    ASSERT_TRUE(sync->BeginStep({}).ok());
    sync->OnGradientsReady(0, 5);
    EXPECT_EQ(sync->FinishStep(Lr1()).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    Fixture f;
    FakeCommunicator comm(1);
    auto sync = MakeSync(f, &comm, 10);
    ASSERT_TRUE(sync->BeginStep({}).ok());
    sync->OnGradientsReady(30, 40);
    sync->OnGradientsReady(30, 40);
    EXPECT_EQ(sync->FinishStep(Lr1()).code(), absl::StatusCode::kInvalidArgument);
  }
  {
    Fixture f;
    FakeCommunicator comm(1);
    auto sync = MakeSync(f, &comm, 10);
    sync->OnGradientsReady(30, 40);  // outside a step
    EXPECT_EQ(sync->BeginStep({}).code(), absl::StatusCode::kFailedPrecondition);
  }
  {
    Fixture f;
    FakeCommunicator comm(1);
    auto sync = MakeSync(f, &comm, 10);
    EXPECT_EQ(sync->FinishStep(Lr1()).code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(AllreduceSync, DestroyingMidStepDoesNotHangOrIssueMore) {
  Fixture f;
  FakeCommunicator comm(1);
  auto sync = MakeSync(f, &comm, 10);
  ASSERT_TRUE(sync->BeginStep({}).ok());
  sync->OnGradientsReady(30, 40);
  ASSERT_TRUE(comm.WaitForCalls(1));
  sync.reset();  // joins the communication thread without finishing the step
  EXPECT_EQ(comm.calls().size(), 1u);
  for (float p : f.params) ASSERT_EQ(p, 0.f);
}

// A DeviceStepper over host memory: counts calls and mirrors a host SGD.
class HostStepper final : public optim::DeviceStepper {
 public:
  explicit HostStepper(optim::Optimizer* host) : host_(host) {}
  absl::StatusOr<double> SumOfSquares(const float* grads, int64_t n) override {
    ++norms;
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(grads[i]) * grads[i];
    return s;
  }
  absl::Status Step(float* params, const float* grads, int64_t n,
                    const optim::StepContext& ctx) override {
    ++steps;
    return host_->Step(params, grads, n, ctx);
  }
  absl::Status LoadState() override {
    ++loads;
    return absl::OkStatus();
  }
  absl::Status SaveState() override {
    ++saves;
    return absl::OkStatus();
  }
  int norms = 0, steps = 0, loads = 0, saves = 0;

 private:
  optim::Optimizer* host_;
};

TEST(AllreduceSync, OwnsTheStepperItsFactoryBuildsAndForwardsState) {
  Fixture f;
  FakeCommunicator comm(1);
  AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = f.params.data();
  o.grads = f.grads.data();
  o.size = kSize;
  o.ready_ranges = kRanges;
  o.max_grad_norm = 1.0;
  o.optimizer = *optim::Sgd::Create({0, kSize}, optim::SgdOptions());
  optim::Optimizer* host = o.optimizer.get();
  HostStepper* stepper = nullptr;
  o.make_device_stepper =
      [&](optim::Optimizer* opt) -> absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> {
    EXPECT_EQ(opt, host);
    auto s = std::make_unique<HostStepper>(opt);
    stepper = s.get();
    return std::unique_ptr<optim::DeviceStepper>(std::move(s));
  };
  auto sync = CreateAllreduceSync(std::move(o));
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_NE(stepper, nullptr);
  EXPECT_EQ((*sync)->optimizer(), host);
  f.grads[3] = 3.f;
  f.grads[37] = 4.f;  // norm 5, clipped to 1
  ASSERT_TRUE((*sync)->BeginStep({}).ok());
  for (const auto& [lo, hi] : kRanges) (*sync)->OnGradientsReady(lo, hi);
  ASSERT_TRUE((*sync)->FinishStep(Lr1()).ok());
  EXPECT_EQ(stepper->norms, 1);
  EXPECT_EQ(stepper->steps, 1);
  EXPECT_NEAR(f.params[3], -0.6f, 1e-6);
  ASSERT_TRUE((*sync)->SyncStateToHost().ok());
  ASSERT_TRUE((*sync)->StateLoaded().ok());
  EXPECT_EQ(stepper->saves, 1);
  EXPECT_EQ(stepper->loads, 1);
}

TEST(AllreduceSync, DeviceStepperFactoryErrorIsReturned) {
  Fixture f;
  FakeCommunicator comm(1);
  AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = f.params.data();
  o.grads = f.grads.data();
  o.size = kSize;
  o.ready_ranges = kRanges;
  o.optimizer = *optim::Sgd::Create({0, kSize}, optim::SgdOptions());
  o.make_device_stepper = [](optim::Optimizer*) -> absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> {
    return absl::UnimplementedError("no stepper for backend 'tpu'");
  };
  auto sync = CreateAllreduceSync(std::move(o));
  EXPECT_EQ(sync.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(sync.status().message().find("backend 'tpu'"), std::string::npos) << sync.status();
}

TEST(AllreduceSync, RejectsBadOptions) {
  Fixture f;
  FakeCommunicator comm(1);
  auto base = [&]() {
    AllreduceSyncOptions o;
    o.comm = &comm;
    o.params = f.params.data();
    o.grads = f.grads.data();
    o.size = kSize;
    o.ready_ranges = kRanges;
    o.optimizer = *optim::Sgd::Create({0, kSize}, optim::SgdOptions());
    return o;
  };
  {
    AllreduceSyncOptions o = base();
    o.comm = nullptr;
    EXPECT_EQ(CreateAllreduceSync(std::move(o)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    AllreduceSyncOptions o = base();
    o.optimizer = *optim::Sgd::Create({0, kSize / 2}, optim::SgdOptions());
    EXPECT_EQ(CreateAllreduceSync(std::move(o)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    AllreduceSyncOptions o = base();
    o.ready_ranges.pop_back();
    EXPECT_EQ(CreateAllreduceSync(std::move(o)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    AllreduceSyncOptions o = base();
    o.bucket_cap_mb = 0;
    EXPECT_EQ(CreateAllreduceSync(std::move(o)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    AllreduceSyncOptions o = base();
    o.max_grad_norm = -1;
    EXPECT_EQ(CreateAllreduceSync(std::move(o)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  {
    AllreduceSyncOptions o = base();
    o.grads = nullptr;
    EXPECT_EQ(CreateAllreduceSync(std::move(o)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  auto ok = CreateAllreduceSync(base());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->name(), "allreduce");
}

}  // namespace
}  // namespace sync
}  // namespace tandem
