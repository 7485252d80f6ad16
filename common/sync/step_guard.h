// StepGuard: the step protocol of gradient_sync.h, enforced the same way by
// every strategy — BeginStep once, then FinishStep; grad_scale finite; after
// any failure every later call is FAILED_PRECONDITION naming the first
// error ("destroy this sync and re-join").
//
//   absl::Status BeginStep(const StepOptions& o) override {
//     RETURN_IF_ERROR(guard_.CheckBegin(o));
//     return guard_.Started(engine_->BeginStep(), o);
//   }
//   absl::Status FinishStep(const optim::StepContext& c) override {
//     RETURN_IF_ERROR(guard_.CheckFinish());
//     RETURN_IF_ERROR(guard_.Record(engine_->FinishStep()));
//     return guard_.Record(Update(c));
//   }
//
// Not thread-safe: the trainer thread calls it (as it calls the strategy).
#ifndef TANDEM_COMMON_SYNC_STEP_GUARD_H_
#define TANDEM_COMMON_SYNC_STEP_GUARD_H_

#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

class StepGuard {
 public:
  // `label` starts every message ("allreduce", "zero2", ...).
  explicit StepGuard(std::string label) : label_(std::move(label)) {}

  // OK, or FAILED_PRECONDITION naming `call` and the first error.
  absl::Status CheckUsable(const char* call) const {
    if (broken_.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(label_, ": ", call,
                                                      " after an earlier error (",
                                                      broken_.message(),
                                                      "); destroy this sync and re-join"));
  }

  // BeginStep's checks: usable, grad_scale finite, not already in a step.
  absl::Status CheckBegin(const StepOptions& options) const {
    if (absl::Status s = CheckUsable("BeginStep"); !s.ok()) return s;
    if (!std::isfinite(options.grad_scale)) {
      return absl::InvalidArgumentError(
          absl::StrCat(label_, ": grad_scale must be finite, got ", options.grad_scale));
    }
    if (in_step_) {
      return absl::FailedPreconditionError(
          absl::StrCat(label_, ": BeginStep called twice without FinishStep in between"));
    }
    return absl::OkStatus();
  }

  // The step has begun when `begun` (the engine's BeginStep) is OK.
  absl::Status Started(absl::Status begun, const StepOptions& options) {
    if (!begun.ok()) return Record(std::move(begun));
    options_ = options;
    in_step_ = true;
    return absl::OkStatus();
  }

  // FinishStep's checks: usable and in a step (which it ends).
  absl::Status CheckFinish() {
    if (absl::Status s = CheckUsable("FinishStep"); !s.ok()) return s;
    if (!in_step_) {
      return absl::FailedPreconditionError(
          absl::StrCat(label_, ": FinishStep called without BeginStep"));
    }
    in_step_ = false;
    return absl::OkStatus();
  }

  // Keeps the first error; returns `s`.
  absl::Status Record(absl::Status s) {
    if (!s.ok() && broken_.ok()) broken_ = s;
    return s;
  }

  // BeginStep's grad_scale for the step in progress (or the last one).
  float grad_scale() const { return options_.grad_scale; }
  // BeginStep's options for the step in progress (or the last one).
  const StepOptions& options() const { return options_; }
  const std::string& label() const { return label_; }
  // No error recorded yet.
  bool ok() const { return broken_.ok(); }

 private:
  std::string label_;
  bool in_step_ = false;
  StepOptions options_;
  absl::Status broken_;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_STEP_GUARD_H_
