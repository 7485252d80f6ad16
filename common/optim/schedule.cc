#include "common/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace optim {

absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name) {
  if (name == "constant") return ScheduleKind::kConstant;
  if (name == "cosine") return ScheduleKind::kWarmupCosine;
  if (name == "linear") return ScheduleKind::kWarmupLinear;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown learning-rate schedule '", name,
      "'; use one of: constant, cosine, linear"));
}

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleOptions& o) {
  if (!(o.base_lr > 0) || !std::isfinite(o.base_lr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LrScheduleOptions.base_lr must be finite and > 0, got ", o.base_lr));
  }
  if (o.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LrScheduleOptions.warmup_steps must be >= 0, got ", o.warmup_steps));
  }
  if (o.kind != ScheduleKind::kConstant) {
    if (o.total_steps <= o.warmup_steps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LrScheduleOptions.total_steps (", o.total_steps,
          ") must exceed warmup_steps (", o.warmup_steps,
          ") for a decaying schedule"));
    }
    if (!(o.final_lr >= 0 && o.final_lr <= o.base_lr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LrScheduleOptions.final_lr must be in [0, base_lr = ", o.base_lr,
          "], got ", o.final_lr));
    }
  }
  return LrSchedule(o);
}

float LrSchedule::LearningRate(int64_t step) const {
  const LrScheduleOptions& o = options_;
  const int64_t s = std::max<int64_t>(step, 1);
  if (o.warmup_steps > 0 && s <= o.warmup_steps) {
    return static_cast<float>(o.base_lr * static_cast<double>(s) /
                              static_cast<double>(o.warmup_steps));
  }
  if (o.kind == ScheduleKind::kConstant) return static_cast<float>(o.base_lr);
  const double p = std::clamp(
      static_cast<double>(s - o.warmup_steps) /
          static_cast<double>(o.total_steps - o.warmup_steps),
      0.0, 1.0);
  double lr;
  if (o.kind == ScheduleKind::kWarmupCosine) {
    lr = o.final_lr +
         (o.base_lr - o.final_lr) * 0.5 * (1.0 + std::cos(M_PI * p));
  } else {
    lr = o.base_lr + (o.final_lr - o.base_lr) * p;
  }
  return static_cast<float>(lr);
}

absl::StatusOr<ScalingRule> ParseScalingRule(absl::string_view name) {
  if (name == "none") return ScalingRule::kNone;
  if (name == "linear") return ScalingRule::kLinear;
  if (name == "sqrt") return ScalingRule::kSqrt;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown learning-rate scaling rule '", name,
      "'; use one of: none, linear (SGD), sqrt (Adam)"));
}

absl::StatusOr<double> ScaleLearningRate(double base_lr, double scale_factor,
                                         ScalingRule rule) {
  if (!(scale_factor > 0) || !std::isfinite(scale_factor) ||
      !(base_lr > 0) || !std::isfinite(base_lr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning-rate scaling needs a finite base_lr > 0 and scale factor "
        "> 0 (world size or batch ratio); got base_lr = ",
        base_lr, ", factor = ", scale_factor));
  }
  switch (rule) {
    case ScalingRule::kNone:
      return base_lr;
    case ScalingRule::kLinear:
      return base_lr * scale_factor;
    case ScalingRule::kSqrt:
      return base_lr * std::sqrt(scale_factor);
  }
  return base_lr;
}

}  // namespace optim
}  // namespace tandem
