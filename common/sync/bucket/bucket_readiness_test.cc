// BucketReadiness, thread-free: a plan's buckets are emitted in plan order
// whatever order ranges arrive in, unknown and repeated ranges are refused
// and count nothing; free units are emitted as soon as their elements are
// all reported, over-reporting makes the step incomplete; Reset reopens.
#include "common/sync/bucket/bucket_readiness.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Outcome = BucketReadiness::Outcome;
using Ranges = BucketReadiness::Ranges;

// Backward order (high to low memory), 10 floats each.
const Ranges kRanges = {{30, 40}, {20, 30}, {10, 20}, {0, 10}};

// Two buckets of two ranges: [20, 40) then [0, 20).
BucketPlan TwoBuckets() {
  absl::StatusOr<BucketPlan> plan = PlanBuckets(kRanges, 40, 20 * sizeof(float));
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->buckets.size(), 2u);
  return *plan;
}

TEST(BucketReadinessTest, PlanBucketsAreEmittedInPlanOrderWhateverTheArrivalOrder) {
  BucketReadiness ready = BucketReadiness::ForPlan(TwoBuckets(), kRanges);
  std::vector<int> emitted;
  auto record = [&](int b) { emitted.push_back(b); };
  // Bucket 1's ranges first: complete, but bucket 0 is not, so nothing yet.
  EXPECT_EQ(ready.Report(0, 10, record), Outcome::kCounted);
  EXPECT_EQ(ready.Report(10, 20, record), Outcome::kCounted);
  EXPECT_TRUE(emitted.empty());
  EXPECT_EQ(ready.Report(30, 40, record), Outcome::kCounted);
  EXPECT_TRUE(emitted.empty());
  // Bucket 0 completes: both go, in plan order.
  EXPECT_EQ(ready.Report(20, 30, record), Outcome::kCounted);
  EXPECT_EQ(emitted, (std::vector<int>{0, 1}));
  EXPECT_EQ(ready.emitted(), 2);
  EXPECT_EQ(ready.ranges_reported(), 4);
  EXPECT_TRUE(ready.complete());
}

TEST(BucketReadinessTest, PlanBucketIsEmittedOnItsLastRangeInBackwardOrder) {
  BucketReadiness ready = BucketReadiness::ForPlan(TwoBuckets(), kRanges);
  std::vector<int> emitted;
  auto record = [&](int b) { emitted.push_back(b); };
  ready.Report(30, 40, record);
  EXPECT_TRUE(emitted.empty());
  ready.Report(20, 30, record);
  EXPECT_EQ(emitted, (std::vector<int>{0}));
  ready.Report(10, 20, record);
  EXPECT_EQ(emitted, (std::vector<int>{0}));
  EXPECT_FALSE(ready.complete());
  ready.Report(0, 10, record);
  EXPECT_EQ(emitted, (std::vector<int>{0, 1}));
}

TEST(BucketReadinessTest, PlanRefusesUnknownAndRepeatedRangesAndCountsNothing) {
  BucketReadiness ready = BucketReadiness::ForPlan(TwoBuckets(), kRanges);
  int calls = 0;
  auto count = [&](int) { ++calls; };
  EXPECT_EQ(ready.Report(30, 35, count), Outcome::kUnknownRange);  // part of a range
  EXPECT_EQ(ready.Report(20, 40, count), Outcome::kUnknownRange);  // two ranges at once
  EXPECT_EQ(ready.Report(40, 50, count), Outcome::kUnknownRange);  // outside
  EXPECT_EQ(ready.Report(30, 40, count), Outcome::kCounted);
  EXPECT_EQ(ready.Report(30, 40, count), Outcome::kRepeatedRange);
  EXPECT_EQ(ready.ranges_reported(), 1);
  // The refused reports took nothing off bucket 0: it needs [20, 30) still.
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(ready.Report(20, 30, count), Outcome::kCounted);
  EXPECT_EQ(calls, 1);
}

TEST(BucketReadinessTest, ResetReopensTheStep) {
  BucketReadiness ready = BucketReadiness::ForPlan(TwoBuckets(), kRanges);
  int calls = 0;
  auto count = [&](int) { ++calls; };
  for (const auto& [lo, hi] : kRanges) ready.Report(lo, hi, count);
  EXPECT_EQ(calls, 2);
  ready.Reset();
  EXPECT_EQ(ready.emitted(), 0);
  EXPECT_EQ(ready.ranges_reported(), 0);
  EXPECT_FALSE(ready.complete());
  // The same range is new again after Reset.
  EXPECT_EQ(ready.Report(30, 40, count), Outcome::kCounted);
  EXPECT_EQ(ready.Report(20, 30, count), Outcome::kCounted);
  EXPECT_EQ(calls, 3);
}

TEST(BucketReadinessTest, FreeUnitsAreEmittedAsSoonAsTheirElementsAreAllReported) {
  // Chunks of 15 over [0, 40): reports straddle chunk borders.
  BucketReadiness ready = BucketReadiness::ForUnits({{0, 15}, {15, 30}, {30, 40}});
  std::vector<int> emitted;
  auto record = [&](int u) { emitted.push_back(u); };
  EXPECT_EQ(ready.Report(30, 40, record), Outcome::kCounted);
  EXPECT_EQ(emitted, (std::vector<int>{2}));
  EXPECT_EQ(ready.Report(10, 20, record), Outcome::kCounted);  // part of 0 and of 1
  EXPECT_EQ(emitted, (std::vector<int>{2}));
  EXPECT_EQ(ready.Report(0, 10, record), Outcome::kCounted);  // unit 0 done before unit 1
  EXPECT_EQ(emitted, (std::vector<int>{2, 0}));
  EXPECT_EQ(ready.Report(20, 30, record), Outcome::kCounted);
  EXPECT_EQ(emitted, (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(ready.emitted(), 3);
  EXPECT_TRUE(ready.complete());
}

TEST(BucketReadinessTest, FreeUnitsOverReportedOrMissingAreNotComplete) {
  BucketReadiness ready = BucketReadiness::ForUnits({{0, 15}, {15, 30}, {30, 40}});
  auto ignore = [](int) {};
  ready.Report(0, 40, ignore);
  EXPECT_TRUE(ready.complete());
  ready.Report(35, 40, ignore);  // reported twice
  EXPECT_EQ(ready.emitted(), 3);
  EXPECT_FALSE(ready.complete());

  ready.Reset();
  ready.Report(0, 30, ignore);  // [30, 40) missing
  EXPECT_EQ(ready.emitted(), 2);
  EXPECT_FALSE(ready.complete());
  ready.Report(5, 5, ignore);  // empty: counts nothing
  EXPECT_EQ(ready.emitted(), 2);
}

TEST(BucketReadinessTest, FreeUnitsInOrderAreEmittedInTheOrderListed) {
  // Listed high to low (hybrid's issue order); reports straddle borders.
  BucketReadiness ready = BucketReadiness::ForUnitsInOrder({{30, 40}, {15, 30}, {0, 15}});
  std::vector<int> emitted;
  auto record = [&](int u) { emitted.push_back(u); };
  ready.Report(0, 15, record);  // unit 2 complete, but units 0 and 1 are not
  EXPECT_TRUE(emitted.empty());
  ready.Report(15, 35, record);  // unit 1 complete, unit 0 half
  EXPECT_TRUE(emitted.empty());
  EXPECT_EQ(ready.completed(), 2);
  EXPECT_EQ(ready.emitted(), 0);
  ready.Report(35, 40, record);
  EXPECT_EQ(emitted, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ready.complete());
  ready.Report(39, 40, record);  // over-reported
  EXPECT_FALSE(ready.complete());
  EXPECT_EQ(emitted.size(), 3u);
}

TEST(BucketReadinessTest, PlanOfDescendingBucketsUnderAnySplit) {
  // One range per bucket (cap of one range), reported in reverse plan order:
  // nothing goes until the first bucket, then everything at once.
  absl::StatusOr<BucketPlan> plan = PlanBuckets(kRanges, 40, 10 * sizeof(float));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets.size(), 4u);
  BucketReadiness ready = BucketReadiness::ForPlan(*plan, kRanges);
  std::vector<int> emitted;
  auto record = [&](int b) { emitted.push_back(b); };
  for (int r = 3; r >= 1; --r) ready.Report(kRanges[r].first, kRanges[r].second, record);
  EXPECT_TRUE(emitted.empty());
  ready.Report(kRanges[0].first, kRanges[0].second, record);
  EXPECT_EQ(emitted, (std::vector<int>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace sync
}  // namespace tandem
