// DynamicLossScaler: dynamic loss scaling for fp16 training.
//
//   loss *= scaler.scale();  backward();  widen grads to fp32;
//   bool bad = HasNonFinite(my_grads);   // then OR-allreduce across ranks
//   ASSIGN_OR_RETURN(LossScaleDecision d, scaler.Update(bad));
//   if (d == LossScaleDecision::kApply) {
//     ctx.grad_scale = scaler.inverse_scale_of_last_step() * clip.scale;
//     ctx.step = ++applied_step;  RETURN_IF_ERROR(opt->Step(..., ctx));
//   }  // kSkip: gradients are dropped, parameters and optimizer untouched.
//
// Rules (as torch.cuda.amp.GradScaler):
//   - non-finite gradients (inf/NaN anywhere, on any rank): the step is
//     skipped, skipped_steps() and consecutive_skips() grow, the scale is
//     multiplied by backoff_factor (not below min_scale) and the growth
//     counter restarts;
//   - finite gradients: the step is applied; after growth_interval applied
//     steps in a row the scale is multiplied by growth_factor (not above
//     max_scale).
// A skip is never silent: Update() returns kSkip, which callers must act on
// ([[nodiscard]]), and the counters are exposed for metrics. After
// max_consecutive_skips skips in a row Update() returns FailedPrecondition:
// the run has diverged and no scale will fix it.
//
// Thread-safety: not thread-safe; the training loop owns it. State can be
// saved in a checkpoint with SerializeState() / RestoreState().
#ifndef TANDEM_COMMON_OPTIM_LOSS_SCALER_H_
#define TANDEM_COMMON_OPTIM_LOSS_SCALER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace optim {

struct LossScalerOptions {
  float initial_scale = 65536.0f;  // 2^16, > 0
  float growth_factor = 2.0f;      // > 1
  float backoff_factor = 0.5f;     // in (0, 1)
  int64_t growth_interval = 2000;  // applied steps in a row before growing, >= 1
  float min_scale = 1.0f;          // floor for backoff, > 0
  float max_scale = 16777216.0f;   // 2^24, ceiling for growth, >= initial
  int64_t max_consecutive_skips = 100;  // 0 = never give up
};

enum class LossScaleDecision { kApply, kSkip };

class DynamicLossScaler {
 public:
  // InvalidArgument for inconsistent options (message names the field).
  static absl::StatusOr<DynamicLossScaler> Create(
      const LossScalerOptions& options);

  // Scale to multiply the loss by before backward.
  float scale() const { return scale_; }
  // 1 / scale() (exact for power-of-two scales): the gradient multiplier.
  float inverse_scale() const { return 1.0f / scale_; }
  // The scale the gradients that were just checked were computed with.
  // Update() may change scale(); use this one to unscale the applied step.
  float inverse_scale_of_last_step() const { return 1.0f / last_scale_; }

  // Records the outcome of one step. `found_non_finite` must be the same on
  // every rank (OR-reduced). See the header comment for the rules.
  [[nodiscard]] absl::StatusOr<LossScaleDecision> Update(bool found_non_finite);

  int64_t skipped_steps() const { return skipped_; }
  int64_t applied_steps() const { return applied_; }
  int64_t consecutive_skips() const { return consecutive_skips_; }
  // Applied steps since the last growth or backoff.
  int64_t growth_tracker() const { return growth_tracker_; }

  // Fixed 48-byte little-endian record: magic "TLSS", version, scale,
  // growth tracker, skipped, applied, consecutive skips.
  std::string SerializeState() const;
  // InvalidArgument if `bytes` is not a record SerializeState() wrote.
  absl::Status RestoreState(absl::string_view bytes);

 private:
  explicit DynamicLossScaler(const LossScalerOptions& options);

  LossScalerOptions options_;
  float scale_;
  float last_scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
  int64_t applied_ = 0;
  int64_t consecutive_skips_ = 0;
};

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_LOSS_SCALER_H_
