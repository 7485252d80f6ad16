#include "services/coordinator/batch_controller.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::Status ValidateBatchControllerOptions(const BatchControllerOptions& o) {
  if (o.min_global_batch < 1 || o.max_global_batch < o.min_global_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch auto:MIN,MAX needs 1 <= MIN <= MAX, got ", o.min_global_batch, ",",
        o.max_global_batch));
  }
  if (o.reference_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reference batch must be >= 1, got ", o.reference_batch));
  }
  if (!(o.ema > 0 && o.ema <= 1) || o.reports_per_decision < 1 || o.min_gain < 0 ||
      !(o.fixed_share_prior >= 0 && o.fixed_share_prior < 1)) {
    return absl::InvalidArgumentError(
        "batch controller: ema in (0, 1], reports_per_decision >= 1, min_gain >= 0, "
        "fixed_share_prior in [0, 1)");
  }
  return absl::OkStatus();
}

FittedThroughput::FittedThroughput(const std::map<int64_t, double>& measured,
                                   double fixed_share_prior) {
  // Points (M, seconds per step = M / rate).
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [m, rate] : measured) {
    if (rate <= 0) continue;
    const double x = static_cast<double>(m), y = x / rate;
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  if (n == 0) return;
  known_ = true;
  const double det = n * sxx - sx * sx;
  if (n >= 2 && det > 0) {
    c_ = (n * sxy - sx * sy) / det;
    a_ = (sy - c_ * sx) / n;
  }
  if (n < 2 || det <= 0 || c_ <= 0 || a_ < 0) {
    // One size (or a fit that makes no physical sense): the prior split of
    // the mean measured step.
    const double x = sx / n, y = sy / n;
    a_ = fixed_share_prior * y;
    c_ = (1 - fixed_share_prior) * y / x;
  }
}

double FittedThroughput::SamplesPerSecond(int64_t m) const {
  if (!known_) return 1;
  const double t = a_ + c_ * static_cast<double>(m);
  return t > 0 ? static_cast<double>(m) / t : 0;
}

BatchController::BatchController(BatchControllerOptions options) : o_(options) {}

void BatchController::Observe(const BatchObservation& ob) {
  if (ob.global_batch <= 0) return;
  if (ob.global_batch != current_) {
    current_ = ob.global_batch;
    reports_at_current_ = 0;
  }
  ++reports_at_current_;
  if (ob.samples_per_second > 0) {
    rate_sum_[ob.global_batch] += ob.samples_per_second;
    rate_n_[ob.global_batch] += 1;
  }
  const double b = static_cast<double>(ob.local_batch), big = static_cast<double>(ob.global_batch);
  if (ob.local_grad_sq < 0 || ob.global_grad_sq < 0 || b <= 0 || big <= b) return;
  if (!std::isfinite(ob.local_grad_sq) || !std::isfinite(ob.global_grad_sq)) return;
  const double g2 = (big * ob.global_grad_sq - b * ob.local_grad_sq) / (big - b);
  const double s = (ob.local_grad_sq - ob.global_grad_sq) / (1 / b - 1 / big);
  if (!have_noise_) {
    g2_ = g2;
    s_ = s;
    have_noise_ = true;
  } else {
    g2_ += o_.ema * (g2 - g2_);
    s_ += o_.ema * (s - s_);
  }
}

double BatchController::noise_scale() const {
  if (!have_noise_ || g2_ <= 0) return -1;
  return std::max(0.0, s_) / g2_;
}

double BatchController::efficiency(int64_t m) const {
  const double noise = noise_scale();
  if (noise < 0) return 1;
  return (noise + static_cast<double>(o_.reference_batch)) / (noise + static_cast<double>(m));
}

FittedThroughput BatchController::Fitted() const {
  std::map<int64_t, double> mean;
  for (const auto& [m, sum] : rate_sum_) mean[m] = sum / rate_n_.at(m);
  return FittedThroughput(mean, o_.fixed_share_prior);
}

BatchDecision BatchController::Decide(const ThroughputModel& model, int world) {
  const int64_t w = std::max(1, world);
  BatchDecision d;
  d.noise_scale = noise_scale();
  auto fill = [&](int64_t m, BatchDecision* out) {
    out->global_batch = m;
    out->efficiency = efficiency(m);
    out->throughput = model.SamplesPerSecond(m);
    out->goodput = out->throughput * out->efficiency;
  };
  // Candidates: multiples of the world size inside [min, max].
  int64_t lo = (o_.min_global_batch + w - 1) / w * w;
  int64_t hi = o_.max_global_batch / w * w;
  if (lo > hi) lo = hi = std::max(w, lo);  // none fits: the nearest multiple above min
  BatchDecision best;
  best.goodput = -1;
  for (int64_t m = lo; m <= hi; m += w) {
    BatchDecision c;
    fill(m, &c);
    if (c.goodput > best.goodput) best = c;
  }
  best.noise_scale = d.noise_scale;
  if (current_ <= 0) {
    best.changed = true;
    return best;
  }
  BatchDecision now;
  fill(current_, &now);
  now.noise_scale = d.noise_scale;
  const bool in_range = current_ >= lo && current_ <= hi && current_ % w == 0;
  const bool settled = reports_at_current_ >= o_.reports_per_decision;
  if (best.global_batch != current_ &&
      (!in_range || (settled && best.goodput > now.goodput * (1 + o_.min_gain)))) {
    best.changed = true;
    return best;
  }
  return now;
}

}  // namespace tandem
