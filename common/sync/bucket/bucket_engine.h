// BucketEngine: the overlap machinery shared by bucketed strategies. It
// groups the ranges backward reports into buckets (bucket_plan.h), tracks
// which ranges are final this step (bucket_readiness.h), and runs one
// operation per bucket on its own communication thread (comm_executor.h),
// strictly in plan order, each as soon as its last range is reported and the
// previous bucket is done. What the operation does
// is the strategy's: an in-place allreduce (allreduce), a reduce-scatter into
// the owned shard (ZeRO-2), encode + exchange (compressed codecs).
//
//   BucketEngineOptions o;
//   o.ready_ranges = ranges;  o.size = n;  o.bucket_cap_mb = 25;
//   o.label = "allreduce sync";  o.operation_name = "allreduce";  o.rank = comm->rank();
//   o.operation = [comm, grads](int b, int64_t lo, int64_t hi) {
//     return comm->AllReduce(grads + lo, hi - lo, ReduceOp::kSum);
//   };
//   ASSIGN_OR_RETURN(std::unique_ptr<BucketEngine> engine, BucketEngine::Create(std::move(o)));
//   RETURN_IF_ERROR(engine->BeginStep());
//   engine->OnGradientsReady(lo, hi);       // backward thread, per range
//   RETURN_IF_ERROR(engine->FinishStep());  // every bucket's operation is done
//
// The issue order is the plan's on every rank whatever order ranges arrive
// in, so collectives match across ranks. Nothing is allocated per step (the
// per-step state is sized once in Create), and the operation is called with
// no lock held.
//
// Thread-safety: BeginStep / FinishStep from one (trainer) thread,
// OnGradientsReady from the backward thread between them; stats() and
// plan() from any thread. The operation runs on the communication thread
// only, one call at a time.
// Failure: Create returns InvalidArgument for ranges that do not tile
// [0, size), a bad cap or a missing operation. An operation's error, an
// unknown or repeated range, ranges reported outside a step or a step whose
// ranges were not all reported make BeginStep / FinishStep return an error
// naming the bucket, the step and the rank (prefixed by `label`); after an
// error the engine issues nothing more and every later step fails
// (FailedPrecondition): destroy it. No wait is unbounded beyond the
// operation's own (the communicator's timeout). The destructor stops the
// thread, waiting for an in-flight operation.
#ifndef TANDEM_COMMON_SYNC_BUCKET_BUCKET_ENGINE_H_
#define TANDEM_COMMON_SYNC_BUCKET_BUCKET_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/sync/bucket/bucket_plan.h"
#include "common/sync/bucket/bucket_readiness.h"
#include "common/sync/bucket/comm_executor.h"

namespace tandem {
namespace sync {

// Bucket `bucket` (0-based, plan order) covers [lo, hi) of the flat vector.
using BucketOperation = std::function<absl::Status(int bucket, int64_t lo, int64_t hi)>;

struct BucketEngineOptions {
  // The ranges backward reports, in backward order (nn::GroupRanges).
  std::vector<std::pair<int64_t, int64_t>> ready_ranges;
  int64_t size = 0;                          // the ranges tile [0, size)
  double bucket_cap_mb = 25;                 // MiB of fp32 elements per bucket, > 0
  BucketOperation operation;                 // required
  std::string label = "sync";                // error prefix: "allreduce sync"
  std::string operation_name = "operation";  // "allreduce of bucket 2 of 4 ..."
  int rank = 0;                              // named in errors
};

// Cumulative.
struct BucketEngineStats {
  int64_t steps = 0;                // successful FinishSteps
  int64_t buckets = 0;              // operations that succeeded
  int64_t elements = 0;             // fp32 elements those buckets covered
  double busy_seconds = 0;          // time spent inside the operation
  double exposed_wait_seconds = 0;  // time FinishStep waited for buckets
};

class BucketEngine {
 public:
  static absl::StatusOr<std::unique_ptr<BucketEngine>> Create(BucketEngineOptions options);
  ~BucketEngine();
  BucketEngine(const BucketEngine&) = delete;
  BucketEngine& operator=(const BucketEngine&) = delete;

  const BucketPlan& plan() const { return plan_; }

  // Opens a step: no range is final. FailedPrecondition when a step is open
  // already, after an earlier error, or when ranges were reported while no
  // step was open.
  absl::Status BeginStep();
  // [lo, hi) is final for this step; returns at once.
  void OnGradientsReady(int64_t lo, int64_t hi);
  // Closes the step: fails at once on a range error or a missing range,
  // otherwise waits until every bucket's operation is done (or one failed).
  absl::Status FinishStep();

  BucketEngineStats stats() const;

 private:
  BucketEngine(BucketEngineOptions options, BucketPlan plan);
  // Communication thread (the executor's): bucket b's operation, unless
  // the step was abandoned or an earlier operation failed.
  absl::Status RunBucket(int b);

  const std::vector<std::pair<int64_t, int64_t>> ranges_;  // backward order
  const BucketOperation operation_;
  const std::string label_;
  const std::string operation_name_;
  const char* const trace_name_;  // operation_name_ interned: the bucket's trace span
  const int rank_;
  const BucketPlan plan_;

  mutable absl::Mutex mu_;
  // Per-step progress, reset by BeginStep; a bucket is queued on the
  // executor as readiness_ emits it (plan order).
  BucketReadiness readiness_ ABSL_GUARDED_BY(mu_);
  absl::Status range_error_ ABSL_GUARDED_BY(mu_);
  bool in_step_ ABSL_GUARDED_BY(mu_) = false;      // between BeginStep and FinishStep
  bool step_active_ ABSL_GUARDED_BY(mu_) = false;  // queued buckets may run
  absl::Status error_ ABSL_GUARDED_BY(mu_);        // sticky: operation or step error
  BucketEngineStats stats_ ABSL_GUARDED_BY(mu_);

  // Last: its thread runs RunBucket over the members above, and it is
  // destroyed (the thread stopped) first.
  CommExecutor<int> executor_;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_BUCKET_BUCKET_ENGINE_H_
