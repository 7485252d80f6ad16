#include "common/sync/bucket/bucket_plan.h"

#include <algorithm>
#include <random>

#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Checks the invariants every plan must satisfy: buckets are runs of whole
// consecutive ranges, contiguous, within the cap unless a single range, and
// together tile [0, size) exactly once.
void ExpectValidPlan(const BucketPlan& plan, const Ranges& ranges, int64_t size,
                     int64_t cap_elems) {
  ASSERT_EQ(plan.bucket_of_range.size(), ranges.size());
  std::vector<int> covered(size, 0);
  int next_range = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const Bucket& bucket = plan.buckets[b];
    EXPECT_EQ(bucket.first_range, next_range) << "bucket " << b;
    ASSERT_GT(bucket.end_range, bucket.first_range);
    int64_t total = 0;
    for (int r = bucket.first_range; r < bucket.end_range; ++r) {
      EXPECT_EQ(plan.bucket_of_range[r], static_cast<int>(b));
      EXPECT_GE(ranges[r].first, bucket.lo);
      EXPECT_LE(ranges[r].second, bucket.hi);
      total += ranges[r].second - ranges[r].first;
    }
    EXPECT_EQ(total, bucket.size()) << "bucket " << b << " is not contiguous";
    if (bucket.end_range - bucket.first_range > 1) {
      EXPECT_LE(bucket.size(), cap_elems);
    }
    for (int64_t i = bucket.lo; i < bucket.hi; ++i) ++covered[i];
    next_range = bucket.end_range;
  }
  EXPECT_EQ(next_range, static_cast<int>(ranges.size()));
  for (int64_t i = 0; i < size; ++i) ASSERT_EQ(covered[i], 1) << "element " << i;
}

TEST(BucketPlan, GroupsAscendingRangesUnderTheCap) {
  const Ranges ranges = {{0, 10}, {10, 20}, {20, 25}, {25, 60}, {60, 64}};
  auto plan = PlanBuckets(ranges, 64, 20 * sizeof(float));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // [0,20) fills the cap; [20,25) cannot take [25,60); the oversized
  // [25,60) is a bucket of its own; [60,64) follows it.
  ASSERT_EQ(plan->buckets.size(), 4u);
  EXPECT_EQ(plan->buckets[0].lo, 0);
  EXPECT_EQ(plan->buckets[0].hi, 20);
  EXPECT_EQ(plan->buckets[1].lo, 20);
  EXPECT_EQ(plan->buckets[1].hi, 25);
  EXPECT_EQ(plan->buckets[2].lo, 25);
  EXPECT_EQ(plan->buckets[2].hi, 60);
  EXPECT_EQ(plan->buckets[3].lo, 60);
  EXPECT_EQ(plan->buckets[3].hi, 64);
  ExpectValidPlan(*plan, ranges, 64, 20);
}

TEST(BucketPlan, DescendingRangesAreMergedToo) {
  const Ranges ranges = {{30, 40}, {20, 30}, {5, 20}, {0, 5}};
  auto plan = PlanBuckets(ranges, 40, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets.size(), 1u);
  EXPECT_EQ(plan->buckets[0].lo, 0);
  EXPECT_EQ(plan->buckets[0].hi, 40);
}

TEST(BucketPlan, NonAdjacentConsecutiveRangesStartANewBucket) {
  const Ranges ranges = {{0, 10}, {20, 30}, {10, 20}};
  auto plan = PlanBuckets(ranges, 30, 1 << 20);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->buckets.size(), 2u);  // [0,10) then [20,30)+[10,20) = [10,30)
  ExpectValidPlan(*plan, ranges, 30, 1 << 18);
}

TEST(BucketPlan, RandomRangesAndCapsAlwaysTile) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + rng() % 20;
    Ranges ranges;
    int64_t lo = 0;
    for (int i = 0; i < n; ++i) {
      const int64_t len = 1 + rng() % 100;
      ranges.push_back({lo, lo + len});
      lo += len;
    }
    if (trial % 2) std::reverse(ranges.begin(), ranges.end());
    const int64_t cap_elems = 1 + rng() % 300;
    auto plan = PlanBuckets(ranges, lo, cap_elems * sizeof(float));
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectValidPlan(*plan, ranges, lo, cap_elems);
  }
}

TEST(BucketPlan, RejectsRangesThatDoNotTile) {
  EXPECT_EQ(PlanBuckets({{0, 10}, {12, 20}}, 20, 1024).status().code(),
            absl::StatusCode::kInvalidArgument);  // gap
  EXPECT_EQ(PlanBuckets({{0, 10}, {5, 20}}, 20, 1024).status().code(),
            absl::StatusCode::kInvalidArgument);  // overlap
  EXPECT_EQ(PlanBuckets({{0, 10}}, 20, 1024).status().code(),
            absl::StatusCode::kInvalidArgument);  // short
  EXPECT_EQ(PlanBuckets({{0, 10}, {10, 10}}, 10, 1024).status().code(),
            absl::StatusCode::kInvalidArgument);  // empty range
  EXPECT_EQ(PlanBuckets({{0, 10}}, 10, 0).status().code(),
            absl::StatusCode::kInvalidArgument);  // cap
  EXPECT_TRUE(PlanBuckets({}, 0, 1024).ok());
}

}  // namespace
}  // namespace sync
}  // namespace tandem
