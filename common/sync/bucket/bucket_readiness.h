// BucketReadiness: which units of a flat gradient vector are final this
// step, from the ranges backward reports, and when each unit may be sent.
// A unit is a contiguous [lo, hi): a bucket of a BucketPlan (allreduce,
// ZeRO, compressed, zero3), a shard server's chunk (ps) or hybrid's group
// of chunks. Units are disjoint and cover [0, n); they may be listed in any
// memory order (a plan's buckets run in backward order, high to low).
//
//   // Exact ranges, buckets emitted in plan order (the same on every rank):
//   BucketReadiness ready = BucketReadiness::ForPlan(plan, ranges);
//   ready.Reset();                                          // per step
//   switch (ready.Report(lo, hi, [&](int b) { Issue(b); })) { ... }
//
//   // Any ranges, each unit emitted as soon as it is complete (or, with
//   // ForUnitsInOrder, in the order the units are listed):
//   BucketReadiness ready = BucketReadiness::ForUnits(chunks);
//
// ForPlan expects exactly the plan's ranges: a report that is not one of
// them, or repeats one this step, is refused (kUnknownRange /
// kRepeatedRange) and counts nothing. ForUnits(InOrder) counts any [lo, hi) by its
// overlap with each unit; a repeated range over-counts, and complete() then
// says false for the caller to report.
//
// Not thread-safe and never blocks: one thread reports between Resets (the
// owner holds its own lock if others read it). Nothing is allocated after
// construction. `on_ready` is called synchronously, once per unit per step.
#ifndef TANDEM_COMMON_SYNC_BUCKET_BUCKET_READINESS_H_
#define TANDEM_COMMON_SYNC_BUCKET_BUCKET_READINESS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "common/sync/bucket/bucket_plan.h"

namespace tandem {
namespace sync {

class BucketReadiness {
 public:
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  enum class Order {
    kPlan,     // unit u is emitted once units [0, u] are all complete
    kAsReady,  // unit u is emitted as soon as it is complete
  };
  enum class Outcome { kCounted, kUnknownRange, kRepeatedRange };

  // Units are the plan's buckets, emitted in plan order; reports must be
  // exactly `ranges` (the ones the plan was built from, backward order).
  static BucketReadiness ForPlan(const BucketPlan& plan, Ranges ranges);
  // Units as given (disjoint), emitted as they complete; any report counts.
  static BucketReadiness ForUnits(Ranges units);
  // Units as given (disjoint), emitted in the order listed; any report counts.
  static BucketReadiness ForUnitsInOrder(Ranges units);

  // Opens a step: nothing reported, nothing emitted.
  void Reset();
  // [lo, hi) is final; calls on_ready(u) for every unit this makes
  // emittable, in emission order. Empty ranges count nothing.
  Outcome Report(int64_t lo, int64_t hi, absl::FunctionRef<void(int unit)> on_ready);

  int size() const { return static_cast<int>(units_.size()); }
  int emitted() const { return emitted_count_; }  // units handed to on_ready
  int completed() const { return completed_count_; }  // units fully reported (maybe not emitted)
  int ranges_reported() const { return ranges_reported_; }  // accepted reports
  // Every unit emitted and no element reported twice.
  bool complete() const { return emitted_count_ == size() && over_reported_ == 0; }

 private:
  BucketReadiness(Ranges units, Order order, Ranges expected_ranges);
  int FindExpectedRange(int64_t lo, int64_t hi) const;
  void Subtract(int64_t lo, int64_t hi, absl::FunctionRef<void(int)> on_ready);

  const Ranges units_;
  const Order order_;
  const Ranges expected_;  // ForPlan: the only ranges accepted; empty: any
  std::vector<std::pair<int64_t, int>> units_by_lo_;     // (lo, unit), sorted
  std::vector<std::pair<int64_t, int>> expected_by_lo_;  // (lo, range), sorted

  // Per step, sized once.
  std::vector<int64_t> remaining_;  // per unit: elements not yet reported
  std::vector<char> complete_;      // per unit (kPlan: complete, maybe not emitted)
  std::vector<char> reported_;      // per expected range
  int next_unit_ = 0;               // kPlan: units [0, next_unit_) emitted
  int emitted_count_ = 0;
  int completed_count_ = 0;
  int ranges_reported_ = 0;
  int next_expected_ = 0;  // backward reports in the given order: checked first
  int64_t over_reported_ = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_BUCKET_BUCKET_READINESS_H_
