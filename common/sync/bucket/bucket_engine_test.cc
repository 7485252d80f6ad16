// BucketEngine with a recording operation: buckets are issued in plan order
// as soon as they are ready (before backward ends), whatever order ranges
// arrive in; an operation's error, unknown / repeated / missing ranges and
// ranges outside a step are errors, never hangs; stats add up.
#include "common/sync/bucket/bucket_engine.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int64_t kSize = 40;
const std::vector<std::pair<int64_t, int64_t>> kRanges = {{30, 40}, {20, 30}, {10, 20}, {0, 10}};

// Records (bucket, lo, hi) per call; can fail one call. Each call lasts
// until the clock has visibly advanced, so busy time is measurable.
class Recorder {
 public:
  explicit Recorder(int fail_call = -1) : fail_call_(fail_call) {}

  absl::Status Run(int bucket, int64_t lo, int64_t hi) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() == start) {
    }
    absl::MutexLock lock(&mu_);
    const int call = static_cast<int>(calls_.size());
    calls_.emplace_back(bucket, lo, hi);
    if (call == fail_call_) return absl::UnavailableError("peer 1 went away");
    return absl::OkStatus();
  }

  bool WaitForCalls(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(calls_.size()) >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
  }

  std::vector<std::tuple<int, int64_t, int64_t>> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  const int fail_call_;
  absl::Mutex mu_;
  std::vector<std::tuple<int, int64_t, int64_t>> calls_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<BucketEngine> MakeEngine(Recorder* rec, double cap_floats) {
  BucketEngineOptions o;
  o.ready_ranges = kRanges;
  o.size = kSize;
  o.bucket_cap_mb = cap_floats * sizeof(float) / (1024.0 * 1024.0);
  o.label = "test sync";
  o.operation_name = "reduce";
  o.rank = 3;
  o.operation = [rec](int b, int64_t lo, int64_t hi) { return rec->Run(b, lo, hi); };
  auto engine = BucketEngine::Create(std::move(o));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

void ReportAll(BucketEngine& e) {
  for (const auto& [lo, hi] : kRanges) e.OnGradientsReady(lo, hi);
}

TEST(BucketEngine, IssuesTheFirstBucketBeforeTheLastRangeIsReported) {
  Recorder rec;
  auto engine = MakeEngine(&rec, 10);  // one range per bucket
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->plan().buckets.size(), 4u);
  ASSERT_TRUE(engine->BeginStep().ok());
  engine->OnGradientsReady(30, 40);
  ASSERT_TRUE(rec.WaitForCalls(1)) << "bucket 1 not issued while backward was running";
  engine->OnGradientsReady(20, 30);
  engine->OnGradientsReady(10, 20);
  engine->OnGradientsReady(0, 10);
  ASSERT_TRUE(engine->FinishStep().ok());
  const auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 4u);
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(calls[b], std::make_tuple(b, kRanges[b].first, kRanges[b].second));
  }
}

TEST(BucketEngine, OutOfOrderRangesAreIssuedInPlanOrderAndBucketsMergeRanges) {
  Recorder rec;
  auto engine = MakeEngine(&rec, 20);  // two ranges per bucket: [20,40), [0,20)
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->BeginStep().ok());
  engine->OnGradientsReady(0, 10);
  engine->OnGradientsReady(10, 20);  // bucket 2 is ready first, but waits for bucket 1
  engine->OnGradientsReady(20, 30);
  engine->OnGradientsReady(30, 40);
  ASSERT_TRUE(engine->FinishStep().ok());
  const auto calls = rec.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], std::make_tuple(0, int64_t{20}, int64_t{40}));
  EXPECT_EQ(calls[1], std::make_tuple(1, int64_t{0}, int64_t{20}));
}

TEST(BucketEngine, StatsAddUpOverSteps) {
  Recorder rec;
  auto engine = MakeEngine(&rec, 10);
  ASSERT_NE(engine, nullptr);
  double finish_wall = 0;
  const auto begin = std::chrono::steady_clock::now();
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(engine->BeginStep().ok());
    ReportAll(*engine);
    const auto t = std::chrono::steady_clock::now();
    ASSERT_TRUE(engine->FinishStep().ok());
    finish_wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  const double total_wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const BucketEngineStats s = engine->stats();
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.buckets, 12);
  EXPECT_EQ(s.elements, 3 * kSize);
  EXPECT_GT(s.busy_seconds, 0);  // every operation outlasts a clock tick
  EXPECT_LE(s.busy_seconds, total_wall);
  EXPECT_LE(s.exposed_wait_seconds, finish_wall);
  EXPECT_EQ(rec.calls().size(), 12u);
}

TEST(BucketEngine, FailedOperationIsReturnedAndNothingMoreIsIssued) {
  Recorder rec(/*fail_call=*/1);
  auto engine = MakeEngine(&rec, 10);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->BeginStep().ok());
  ReportAll(*engine);
  absl::Status s = engine->FinishStep();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(),
            "test sync: reduce of bucket 2 of 4 (10 floats) at step 1 on rank 3 failed: peer 1 "
            "went away");
  EXPECT_EQ(rec.calls().size(), 2u);
  EXPECT_EQ(engine->stats().buckets, 1);
  EXPECT_EQ(engine->stats().steps, 0);
  absl::Status again = engine->BeginStep();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find("after an earlier error"), std::string::npos) << again;
}

TEST(BucketEngine, RangeErrorsAreErrorsNotHangs) {
  {
    Recorder rec;
    auto engine = MakeEngine(&rec, 10);
    ASSERT_TRUE(engine->BeginStep().ok());
    engine->OnGradientsReady(30, 40);
    engine->OnGradientsReady(20, 30);
    absl::Status s = engine->FinishStep();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("only 2 of 4 gradient ranges"), std::string::npos) << s;
    EXPECT_FALSE(engine->BeginStep().ok());  // the engine is spent
  }
  {
    Recorder rec;
    auto engine = MakeEngine(&rec, 10);
    ASSERT_TRUE(engine->BeginStep().ok());
    engine->OnGradientsReady(0, 5);
    absl::Status s = engine->FinishStep();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("[0, 5) reported at step 1 are not one of the ready ranges"),
              std::string::npos)
        << s;
  }
  {
    Recorder rec;
    auto engine = MakeEngine(&rec, 10);
    ASSERT_TRUE(engine->BeginStep().ok());
    engine->OnGradientsReady(30, 40);
    engine->OnGradientsReady(30, 40);
    absl::Status s = engine->FinishStep();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("already reported"), std::string::npos) << s;
  }
  {
    Recorder rec;
    auto engine = MakeEngine(&rec, 10);
    engine->OnGradientsReady(30, 40);  // outside a step
    absl::Status s = engine->BeginStep();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("outside BeginStep/FinishStep"), std::string::npos) << s;
    EXPECT_TRUE(rec.calls().empty());
  }
  {
    Recorder rec;
    auto engine = MakeEngine(&rec, 10);
    EXPECT_EQ(engine->FinishStep().code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(engine->BeginStep().ok());
    EXPECT_EQ(engine->BeginStep().code(), absl::StatusCode::kFailedPrecondition);
  }
}

// Destroying the engine mid-step (ranges still missing) neither hangs nor
// abandons the operation in flight: the destructor returns only after that
// operation has returned, and nothing is issued after it.
TEST(BucketEngine, DestroyingMidStepWaitsForTheOperationInFlightAndIssuesNothingMore) {
  absl::Mutex mu;
  bool release = false, returned = false;
  int calls = 0;
  BucketEngineOptions o;
  o.ready_ranges = kRanges;
  o.size = kSize;
  o.bucket_cap_mb = 10 * sizeof(float) / (1024.0 * 1024.0);  // one range per bucket
  o.operation = [&](int, int64_t, int64_t) {
    absl::MutexLock lock(&mu);
    ++calls;
    mu.Await(absl::Condition(&release));
    returned = true;
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<BucketEngine>> engine = BucketEngine::Create(std::move(o));
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->BeginStep().ok());
  (*engine)->OnGradientsReady(30, 40);  // bucket 1 of 4 is ready; its operation blocks
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                        +[](int* c) { return *c >= 1; }, &calls),
                                    absl::Seconds(60)));
  }
  bool returned_before_destructor_ended = false;
  std::thread destroyer([&] {
    engine->reset();
    absl::MutexLock lock(&mu);
    returned_before_destructor_ended = returned;
  });
  {
    absl::MutexLock lock(&mu);
    release = true;
  }
  destroyer.join();
  EXPECT_TRUE(returned_before_destructor_ended)
      << "the destructor returned while the operation was still running";
  absl::MutexLock lock(&mu);
  EXPECT_EQ(calls, 1);
}

TEST(BucketEngine, RejectsBadOptions) {
  BucketEngineOptions o;
  o.ready_ranges = kRanges;
  o.size = kSize;
  EXPECT_EQ(BucketEngine::Create(o).status().code(), absl::StatusCode::kInvalidArgument)
      << "no operation";
  o.operation = [](int, int64_t, int64_t) { return absl::OkStatus(); };
  o.bucket_cap_mb = 0;
  EXPECT_EQ(BucketEngine::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.bucket_cap_mb = 1;
  o.ready_ranges.pop_back();  // no longer tiles [0, 40)
  EXPECT_EQ(BucketEngine::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.ready_ranges = kRanges;
  EXPECT_TRUE(BucketEngine::Create(o).ok());
}

}  // namespace
}  // namespace sync
}  // namespace tandem
