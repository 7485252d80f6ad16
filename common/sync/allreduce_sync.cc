#include "common/sync/allreduce_sync.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/optim/clip.h"
#include "common/status/status_macros.h"
#include "common/sync/bucket_plan.h"

namespace tandem {
namespace sync {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class AllreduceSync final : public GradientSync {
 public:
  AllreduceSync(AllreduceSyncOptions options, BucketPlan plan)
      : comm_(options.comm),
        params_(options.params),
        grads_(options.grads),
        size_(options.size),
        ranges_(std::move(options.ready_ranges)),
        optimizer_(std::move(options.optimizer)),
        max_grad_norm_(options.max_grad_norm),
        device_stepper_(options.device_stepper),
        world_size_(comm_->world_size()),
        rank_(comm_->rank()),
        plan_(std::move(plan)) {
    const int num_ranges = static_cast<int>(ranges_.size());
    const int num_buckets = static_cast<int>(plan_.buckets.size());
    ranges_by_lo_.reserve(num_ranges);
    for (int i = 0; i < num_ranges; ++i) ranges_by_lo_.push_back({ranges_[i].first, i});
    std::sort(ranges_by_lo_.begin(), ranges_by_lo_.end());
    range_reported_.assign(num_ranges, 0);
    bucket_remaining_.assign(num_buckets, 0);
    bucket_ready_.assign(num_buckets, 0);
    thread_ = std::thread([this] { CommLoop(); });
  }

  ~AllreduceSync() override {
    {
      absl::MutexLock lock(&mu_);
      shutdown_ = true;
    }
    thread_.join();
  }

  std::string name() const override { return "allreduce"; }
  optim::ParamRange owned_range() const override { return {0, size_}; }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(CheckUsable("BeginStep"));
    if (in_step_) {
      return absl::FailedPreconditionError(
          "allreduce sync: BeginStep called twice without FinishStep in between");
    }
    if (!std::isfinite(options.grad_scale)) {
      return absl::InvalidArgumentError(
          absl::StrCat("allreduce sync: grad_scale must be finite, got ", options.grad_scale));
    }
    grad_scale_ = options.grad_scale;
    absl::MutexLock lock(&mu_);
    if (!range_error_.ok()) {  // ranges reported while no step was open
      broken_ = range_error_;
      return broken_;
    }
    std::fill(range_reported_.begin(), range_reported_.end(), 0);
    std::fill(bucket_ready_.begin(), bucket_ready_.end(), 0);
    for (size_t b = 0; b < plan_.buckets.size(); ++b) {
      bucket_remaining_[b] = plan_.buckets[b].end_range - plan_.buckets[b].first_range;
    }
    ranges_reported_ = 0;
    next_expected_range_ = 0;
    range_error_ = absl::OkStatus();
    next_bucket_ = 0;
    step_active_ = true;
    in_step_ = true;
    return absl::OkStatus();
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override {
    absl::MutexLock lock(&mu_);
    if (!step_active_ || !range_error_.ok()) {
      if (!step_active_ && range_error_.ok() && comm_error_.ok()) {
        range_error_ = absl::FailedPreconditionError(absl::StrCat(
            "allreduce sync: gradients [", lo, ", ", hi,
            ") reported outside BeginStep/FinishStep (call BeginStep before the last backward)"));
      }
      return;
    }
    const int range = FindRange(lo, hi);
    if (range < 0 || range_reported_[range]) {
      range_error_ = absl::InvalidArgumentError(absl::StrCat(
          "allreduce sync: gradients [", lo, ", ", hi, ") reported at step ", step_number_ + 1,
          range < 0 ? " are not one of the ready ranges the sync was built with"
                    : " were already reported this step"));
      return;
    }
    range_reported_[range] = 1;
    ++ranges_reported_;
    next_expected_range_ = range + 1;
    const int bucket = plan_.bucket_of_range[range];
    if (--bucket_remaining_[bucket] == 0) bucket_ready_[bucket] = 1;
    // The communication thread waits on a Condition over these members;
    // absl::Mutex re-evaluates it when we unlock.
  }

  absl::Status FinishStep(const optim::StepContext& context) override {
    RETURN_IF_ERROR(CheckUsable("FinishStep"));
    if (!in_step_) {
      return absl::FailedPreconditionError("allreduce sync: FinishStep called without BeginStep");
    }
    in_step_ = false;
    const int num_buckets = static_cast<int>(plan_.buckets.size());
    {
      absl::MutexLock lock(&mu_);
      absl::Status error = range_error_;
      if (error.ok() && ranges_reported_ != static_cast<int>(ranges_.size())) {
        error = absl::FailedPreconditionError(absl::StrCat(
            "allreduce sync: only ", ranges_reported_, " of ", ranges_.size(),
            " gradient ranges were reported before FinishStep at step ", step_number_ + 1,
            " (pass the sync's OnGradientsReady as the last backward's callback)"));
      }
      if (!error.ok()) {
        step_active_ = false;  // the communication thread stops after its current bucket
        broken_ = error;
        return error;
      }
      const auto wait_start = std::chrono::steady_clock::now();
      auto done = [this, num_buckets]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return next_bucket_ == num_buckets || !comm_error_.ok();
      };
      mu_.Await(absl::Condition(&done));
      stats_.exposed_wait_seconds += SecondsSince(wait_start);
      step_active_ = false;
      if (!comm_error_.ok()) {
        broken_ = comm_error_;
        return comm_error_;
      }
    }

    // Every rank now holds the same summed gradients, so every rank computes
    // the same scale, the same clip factor and the same update.
    double scale = static_cast<double>(context.grad_scale) * grad_scale_ / world_size_;
    if (max_grad_norm_ > 0 && size_ > 0) {
      double sum_sq = 0;
      if (device_stepper_ != nullptr) {
        absl::StatusOr<double> s = device_stepper_->SumOfSquares(grads_, size_);
        if (!s.ok()) {
          broken_ = absl::Status(s.status().code(),
                                 absl::StrCat("allreduce sync: device gradient norm at step ",
                                              step_number_ + 1, " on rank ", rank_, ": ",
                                              s.status().message()));
          return broken_;
        }
        sum_sq = *s;
      } else {
        sum_sq = optim::PartialSumOfSquares(absl::MakeConstSpan(grads_, size_));
      }
      absl::StatusOr<optim::ClipResult> clip = optim::ComputeClip(sum_sq * scale * scale,
                                                                  max_grad_norm_);
      if (!clip.ok()) {
        broken_ = absl::Status(clip.status().code(),
                               absl::StrCat("allreduce sync: gradient clipping at step ",
                                            step_number_ + 1, " on rank ", rank_, ": ",
                                            clip.status().message()));
        return broken_;
      }
      scale *= clip->scale;
    }
    optim::StepContext ctx = context;
    ctx.grad_scale = static_cast<float>(scale);
    if (size_ > 0) {
      absl::Status s = device_stepper_ != nullptr
                           ? device_stepper_->Step(params_, grads_, size_, ctx)
                           : optimizer_->Step(params_, grads_, size_, ctx);
      if (!s.ok()) {
        broken_ = absl::Status(s.code(), absl::StrCat("allreduce sync: optimizer ",
                                                      optimizer_->name(), " at step ",
                                                      step_number_ + 1, ": ", s.message()));
        return broken_;
      }
    }
    absl::MutexLock lock(&mu_);
    ++step_number_;
    ++stats_.steps;
    return absl::OkStatus();
  }

  SyncStats stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }

 private:
  absl::Status CheckUsable(const char* call) const {
    if (broken_.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "allreduce sync: ", call, " after an earlier error (", broken_.message(),
        "); destroy this sync and re-join"));
  }

  // The index of range [lo, hi), or -1. Backward reports ranges in the
  // order given, so the expected one is checked first.
  int FindRange(int64_t lo, int64_t hi) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int n = static_cast<int>(ranges_.size());
    if (next_expected_range_ < n && ranges_[next_expected_range_].first == lo &&
        ranges_[next_expected_range_].second == hi) {
      return next_expected_range_;
    }
    auto it = std::lower_bound(ranges_by_lo_.begin(), ranges_by_lo_.end(),
                               std::pair<int64_t, int>{lo, -1});
    if (it == ranges_by_lo_.end() || it->first != lo || ranges_[it->second].second != hi) {
      return -1;
    }
    return it->second;
  }

  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || (step_active_ && next_bucket_ < static_cast<int>(bucket_ready_.size()) &&
                         bucket_ready_[next_bucket_]);
  }

  // Issues the buckets strictly in plan order (the same on every rank), each
  // as soon as it is ready.
  void CommLoop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      mu_.Await(absl::Condition(this, &AllreduceSync::HasWork));
      if (shutdown_) return;
      const int b = next_bucket_;
      const Bucket& bucket = plan_.buckets[b];
      const int64_t step = step_number_ + 1;
      mu_.Unlock();
      const auto start = std::chrono::steady_clock::now();
      absl::Status s = comm_->AllReduce(grads_ + bucket.lo, bucket.size(), ReduceOp::kSum);
      const double seconds = SecondsSince(start);
      mu_.Lock();
      stats_.comm_seconds += seconds;
      if (!s.ok()) {
        comm_error_ = absl::Status(
            s.code(), absl::StrCat("allreduce sync: allreduce of bucket ", b + 1, " of ",
                                   plan_.buckets.size(), " (", bucket.size(),
                                   " floats) at step ", step, " on rank ", rank_, " failed: ",
                                   s.message()));
        step_active_ = false;
        continue;
      }
      ++stats_.buckets;
      stats_.bytes_sent += bucket.size() * static_cast<int64_t>(sizeof(float));
      ++next_bucket_;
    }
  }

  Communicator* const comm_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const std::vector<std::pair<int64_t, int64_t>> ranges_;  // backward order
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const double max_grad_norm_;
  DeviceStepper* const device_stepper_;  // borrowed, may be null
  const int world_size_;
  const int rank_;
  const BucketPlan plan_;
  std::vector<std::pair<int64_t, int>> ranges_by_lo_;  // (lo, range index), sorted

  // Trainer thread only.
  bool in_step_ = false;
  float grad_scale_ = 1.0f;
  absl::Status broken_;

  mutable absl::Mutex mu_;
  // Per-step progress, reset by BeginStep; sized once.
  std::vector<char> range_reported_ ABSL_GUARDED_BY(mu_);
  std::vector<int> bucket_remaining_ ABSL_GUARDED_BY(mu_);
  std::vector<char> bucket_ready_ ABSL_GUARDED_BY(mu_);
  int ranges_reported_ ABSL_GUARDED_BY(mu_) = 0;
  int next_expected_range_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status range_error_ ABSL_GUARDED_BY(mu_);
  int next_bucket_ ABSL_GUARDED_BY(mu_) = 0;  // buckets [0, next_bucket_) are summed
  bool step_active_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status comm_error_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  int64_t step_number_ ABSL_GUARDED_BY(mu_) = 0;  // completed steps
  SyncStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;  // last: started once the members above exist
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> CreateAllreduceSync(AllreduceSyncOptions options) {
  if (options.comm == nullptr) {
    return absl::InvalidArgumentError("allreduce sync: a communicator is required");
  }
  if (options.size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allreduce sync: negative size ", options.size));
  }
  if (options.size > 0 && (options.params == nullptr || options.grads == nullptr)) {
    return absl::InvalidArgumentError(
        "allreduce sync: params and grads are required (the model's flat storage)");
  }
  if (options.optimizer == nullptr) {
    return absl::InvalidArgumentError("allreduce sync: an optimizer is required");
  }
  if (options.optimizer->range().lo != 0 || options.optimizer->range().hi != options.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allreduce sync: the optimizer covers [", options.optimizer->range().lo, ", ",
        options.optimizer->range().hi, ") but the allreduce strategy steps the whole vector [0, ",
        options.size, ")"));
  }
  if (!(options.bucket_cap_mb > 0) || !std::isfinite(options.bucket_cap_mb)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allreduce sync: bucket_cap_mb must be positive, got ", options.bucket_cap_mb));
  }
  if (!(options.max_grad_norm >= 0) || !std::isfinite(options.max_grad_norm)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allreduce sync: max_grad_norm must be >= 0 (0 = no clipping), got ",
        options.max_grad_norm));
  }
  const double cap_bytes = options.bucket_cap_mb * 1024.0 * 1024.0;
  ASSIGN_OR_RETURN(BucketPlan plan,
                   PlanBuckets(options.ready_ranges, options.size,
                               static_cast<int64_t>(std::min(cap_bytes, 1e18))));
  return std::unique_ptr<GradientSync>(new AllreduceSync(std::move(options), std::move(plan)));
}

}  // namespace sync
}  // namespace tandem
