// Learning-rate schedules and the world-size scaling rule.
//
//   LrScheduleOptions o;
//   ASSIGN_OR_RETURN(o.base_lr,
//                    ScaleLearningRate(3e-4, /*world_size=*/8, ScalingRule::kSqrt));
//   o.kind = ScheduleKind::kWarmupCosine;
//   o.warmup_steps = 500; o.total_steps = 20000; o.final_lr = 3e-5;
//   ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::Create(o));
//   ctx.lr = schedule.LearningRate(ctx.step);            // step is 1-based
//
// Schedule (step s >= 1, W = warmup_steps, T = total_steps, base, final):
//   kConstant:                lr = base for every step (warm-up still applies
//                             if W > 0).
//   warm-up, s <= W:          lr = base * s / W         (linear from ~0)
//   after warm-up, p = clamp((s - W) / (T - W), 0, 1):
//     kWarmupCosine:          lr = final + (base - final) * 0.5 * (1 + cos(pi p))
//     kWarmupLinear:          lr = base + (final - base) * p
//   s > T:                    lr = final (decays hold their end value).
//
// World-size scaling (global batch grows with the number of workers):
//   kLinear: lr = base * k        kSqrt: lr = base * sqrt(k)
// with k = world_size (or global batch / reference batch).
// Recommendation: kLinear for SGD (momentum), together with a few epochs of
// warm-up — the "linear scaling rule" of Goyal et al. 2017: an SGD step is
// proportional to the gradient, and k times the batch averages k gradients,
// so k small steps ~ one k-times-larger step. kSqrt for Adam/AdamW — Adam
// divides by the gradient's RMS, so its step size does not shrink with the
// lower gradient noise of a bigger batch; keeping the noise scale constant
// gives lr ~ sqrt(k) (Hoffer et al. 2017; Malladi et al. 2022, the SDE
// scaling rule for adaptive methods). Linear scaling of Adam's lr diverges
// easily at large k.
//
// Thread-safe: LrSchedule is immutable after Create(). Failure: Create()
// returns InvalidArgument for inconsistent options (message names the field).
#ifndef TANDEM_COMMON_OPTIM_SCHEDULE_H_
#define TANDEM_COMMON_OPTIM_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {
namespace optim {

enum class ScheduleKind { kConstant, kWarmupCosine, kWarmupLinear };

// "constant", "cosine", "linear" -> kind; InvalidArgument otherwise.
absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name);

struct LrScheduleOptions {
  ScheduleKind kind = ScheduleKind::kConstant;
  double base_lr = 1e-3;      // peak learning rate, > 0 (after world scaling)
  int64_t warmup_steps = 0;   // >= 0; 0 = no warm-up
  int64_t total_steps = 0;    // decays: > warmup_steps; ignored by kConstant
  double final_lr = 0.0;      // decays end here, in [0, base_lr]
};

class LrSchedule {
 public:
  static absl::StatusOr<LrSchedule> Create(const LrScheduleOptions& options);

  // Learning rate for 1-based step `step` (values < 1 are treated as 1).
  float LearningRate(int64_t step) const;

  const LrScheduleOptions& options() const { return options_; }

 private:
  explicit LrSchedule(const LrScheduleOptions& options) : options_(options) {}
  LrScheduleOptions options_;
};

enum class ScalingRule { kNone, kLinear, kSqrt };

// "none", "linear", "sqrt" -> rule; InvalidArgument otherwise.
absl::StatusOr<ScalingRule> ParseScalingRule(absl::string_view name);

// base_lr scaled for `scale_factor` (world size, or global batch divided by
// the batch base_lr was tuned for); factors in (0, 1) shrink it.
// InvalidArgument for a non-positive or non-finite factor or base_lr.
absl::StatusOr<double> ScaleLearningRate(double base_lr, double scale_factor,
                                         ScalingRule rule);

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_SCHEDULE_H_
