#include "common/sync/bucket/bucket_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/timing/seconds_since.h"
#include "common/trace/trace.h"

namespace tandem {
namespace sync {
absl::StatusOr<std::unique_ptr<BucketEngine>> BucketEngine::Create(BucketEngineOptions options) {
  if (!options.operation) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.label, ": the bucket engine needs a per-bucket operation"));
  }
  if (!(options.bucket_cap_mb > 0) || !std::isfinite(options.bucket_cap_mb)) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.label, ": bucket_cap_mb must be positive, got ", options.bucket_cap_mb));
  }
  const double cap_bytes = options.bucket_cap_mb * 1024.0 * 1024.0;
  ASSIGN_OR_RETURN(BucketPlan plan, PlanBuckets(options.ready_ranges, options.size,
                                                static_cast<int64_t>(std::min(cap_bytes, 1e18))));
  return std::unique_ptr<BucketEngine>(new BucketEngine(std::move(options), std::move(plan)));
}

BucketEngine::BucketEngine(BucketEngineOptions options, BucketPlan plan)
    : ranges_(std::move(options.ready_ranges)),
      operation_(std::move(options.operation)),
      label_(std::move(options.label)),
      operation_name_(std::move(options.operation_name)),
      trace_name_(trace::Intern(operation_name_)),
      rank_(options.rank),
      plan_(std::move(plan)),
      readiness_(BucketReadiness::ForPlan(plan_, ranges_)),
      executor_(static_cast<int64_t>(plan_.buckets.size()),
                [this](const int& b) { return RunBucket(b); }) {}

BucketEngine::~BucketEngine() = default;

absl::Status BucketEngine::BeginStep() {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(label_, ": BeginStep after an earlier error (", error_.message(),
                     "); destroy this sync and re-join"));
  }
  if (in_step_) {
    return absl::FailedPreconditionError(
        absl::StrCat(label_, ": BeginStep called twice without FinishStep in between"));
  }
  if (!range_error_.ok()) {  // ranges reported while no step was open
    error_ = range_error_;
    return error_;
  }
  readiness_.Reset();
  in_step_ = true;
  step_active_ = true;
  return absl::OkStatus();
}

void BucketEngine::OnGradientsReady(int64_t lo, int64_t hi) {
  absl::MutexLock lock(&mu_);
  if (!in_step_ || !range_error_.ok()) {
    if (!in_step_ && range_error_.ok() && error_.ok()) {
      range_error_ = absl::FailedPreconditionError(absl::StrCat(
          label_, ": gradients [", lo, ", ", hi,
          ") reported outside BeginStep/FinishStep (call BeginStep before the last backward)"));
    }
    return;
  }
  // Buckets are queued in plan order, each as soon as it is complete.
  // The ring holds every bucket of a step, so Enqueue never waits.
  const BucketReadiness::Outcome outcome =
      readiness_.Report(lo, hi, [this](int b) { executor_.Enqueue(b); });
  if (outcome != BucketReadiness::Outcome::kCounted) {
    range_error_ = absl::InvalidArgumentError(absl::StrCat(
        label_, ": gradients [", lo, ", ", hi, ") reported at step ", stats_.steps + 1,
        outcome == BucketReadiness::Outcome::kUnknownRange
            ? " are not one of the ready ranges the sync was built with"
            : " were already reported this step"));
  }
}

absl::Status BucketEngine::FinishStep() {
  absl::MutexLock lock(&mu_);
  if (!in_step_) {
    return absl::FailedPreconditionError(
        absl::StrCat(label_, ": FinishStep called without BeginStep"));
  }
  in_step_ = false;
  absl::Status error = range_error_;
  if (error.ok() && readiness_.ranges_reported() != static_cast<int>(ranges_.size())) {
    error = absl::FailedPreconditionError(
        absl::StrCat(label_, ": only ", readiness_.ranges_reported(), " of ", ranges_.size(),
                     " gradient ranges were reported before FinishStep at step ", stats_.steps + 1,
                     " (pass the sync's OnGradientsReady as the last backward's callback)"));
  }
  if (!error.ok()) {
    step_active_ = false;  // buckets still queued are skipped
    if (error_.ok()) error_ = error;
    return error;
  }
  // Every bucket was queued (all ranges reported): wait for the last.
  const auto wait_start = std::chrono::steady_clock::now();
  mu_.Unlock();
  (void)executor_.Drain();  // an operation's error is error_, set by RunBucket
  mu_.Lock();
  stats_.exposed_wait_seconds += SecondsSince(wait_start);
  step_active_ = false;
  if (!error_.ok()) return error_;
  ++stats_.steps;
  return absl::OkStatus();
}

BucketEngineStats BucketEngine::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status BucketEngine::RunBucket(int b) {
  const Bucket& bucket = plan_.buckets[b];
  int64_t step;
  {
    absl::MutexLock lock(&mu_);
    if (!step_active_ || !error_.ok()) return absl::OkStatus();  // abandoned: skip
    step = stats_.steps + 1;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status s;
  {
    trace::Span span(trace_name_, "comm", int64_t{sizeof(float)} * bucket.size(), b);
    s = operation_(b, bucket.lo, bucket.hi);
  }
  const double seconds = SecondsSince(start);
  absl::MutexLock lock(&mu_);
  stats_.busy_seconds += seconds;
  if (!s.ok()) {
    error_ = absl::Status(
        s.code(), absl::StrCat(label_, ": ", operation_name_, " of bucket ", b + 1, " of ",
                               plan_.buckets.size(), " (", bucket.size(), " floats) at step ",
                               step, " on rank ", rank_, " failed: ", s.message()));
    step_active_ = false;
    return error_;
  }
  ++stats_.buckets;
  stats_.elements += bucket.size();
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
