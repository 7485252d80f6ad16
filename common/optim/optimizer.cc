#include "common/optim/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace optim {

absl::Status ValidateRange(const ParamRange& range) {
  if (range.lo < 0 || range.hi < range.lo) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer range [", range.lo, ", ", range.hi,
        ") is invalid: need 0 <= lo <= hi"));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::CheckStepArgs(const float* params, const float* grads,
                                      int64_t n, const StepContext& ctx) const {
  if (n != range_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), " owns range [", range_.lo, ", ", range_.hi, ") of ",
        range_.size(), " elements but Step() was given n = ", n,
        "; pass params + lo, grads + lo and n = hi - lo"));
  }
  return CheckSliceArgs(params, grads, 0, n, ctx);
}

absl::Status Optimizer::CheckSliceArgs(const float* params, const float* grads, int64_t offset,
                                       int64_t n, const StepContext& ctx) const {
  if (offset < 0 || n < 0 || offset + n > range_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), " StepSlice(): slice [", offset, ", ", offset + n, ") is outside the ",
        range_.size(), " elements of its range [", range_.lo, ", ", range_.hi, ")"));
  }
  if (n > 0 && (params == nullptr || grads == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), " Step(): params or grads is null"));
  }
  if (ctx.step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), " Step(): step must be >= 1 (1-based update count), got ",
        ctx.step));
  }
  if (!std::isfinite(ctx.lr) || !std::isfinite(ctx.grad_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name(), " Step(): learning rate (", ctx.lr, ") and grad_scale (",
        ctx.grad_scale, ") must be finite"));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::StepSlice(float*, const float*, int64_t, int64_t, const StepContext&) {
  return absl::UnimplementedError(
      absl::StrCat(name(), " cannot step a slice of its range; step the whole range with Step()"));
}

}  // namespace optim
}  // namespace tandem
