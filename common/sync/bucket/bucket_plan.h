// BucketPlan: how the gradient ranges that backward reports are grouped into
// the contiguous buckets that the allreduce strategy sends, one collective
// per bucket.
//
//   ASSIGN_OR_RETURN(BucketPlan plan, PlanBuckets(ranges, size, 25 << 20));
//   // plan.buckets[b] covers [lo, hi) = ranges[first_range, end_range)
//
// Ranges are given in backward order (the order OnGradientsReady reports
// them). A bucket is a run of whole consecutive ranges that are adjacent in
// memory (ascending or descending), so it is one contiguous slice of the flat
// gradient buffer. A bucket grows while it stays within the cap; a range
// larger than the cap is a bucket of its own (never split: a bucket is ready
// only when whole ranges are). Buckets therefore tile [0, size) exactly once.
//
// Thread-safe (pure function). Fails with InvalidArgument when the ranges do
// not tile [0, size) exactly once or the cap is not positive.
#ifndef TANDEM_COMMON_SYNC_BUCKET_BUCKET_PLAN_H_
#define TANDEM_COMMON_SYNC_BUCKET_BUCKET_PLAN_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
namespace sync {

struct Bucket {
  int64_t lo = 0;       // first element of the flat buffer
  int64_t hi = 0;       // one past the last
  int first_range = 0;  // index into the ranges, in backward order
  int end_range = 0;    // one past the last range of this bucket
  int64_t size() const { return hi - lo; }
};

struct BucketPlan {
  std::vector<Bucket> buckets;       // in backward order: issue order
  std::vector<int> bucket_of_range;  // ranges[i] belongs to buckets[bucket_of_range[i]]
};

// `ranges` in backward order; `cap_bytes` of fp32 elements per bucket.
absl::StatusOr<BucketPlan> PlanBuckets(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                       int64_t size, int64_t cap_bytes);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_BUCKET_BUCKET_PLAN_H_
