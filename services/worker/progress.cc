#include "services/worker/progress.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace tandem {
namespace worker {

StepTimes& StepTimes::operator+=(const StepTimes& o) {
  forward += o.forward;
  backward += o.backward;
  comm_wait += o.comm_wait;
  optimizer += o.optimizer;
  data_wait += o.data_wait;
  total += o.total;
  return *this;
}

std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
}

std::string FormatProfile(const StepTimes& t) {
  const double other = std::max(
      0.0, t.total - t.forward - t.backward - t.comm_wait - t.optimizer - t.data_wait);
  return absl::StrFormat(
      "profile ms/step: forward %.2f backward %.2f comm-wait %.2f optimizer %.2f "
      "data-wait %.2f other %.2f total %.2f",
      t.forward * 1e3, t.backward * 1e3, t.comm_wait * 1e3, t.optimizer * 1e3,
      t.data_wait * 1e3, other * 1e3, t.total * 1e3);
}

ProgressReporter::ProgressReporter(ProgressOptions options) : o_(std::move(options)) {
  Restart();
}

void ProgressReporter::Restart() {
  start_ = absl::Now();
  excluded_ = absl::ZeroDuration();
  steps_ = 0;
  loss_ = 0;
  samples_ = 0;
  times_ = StepTimes();
}

void ProgressReporter::AddStep(double mean_loss, int64_t global_samples,
                               const StepTimes& times) {
  ++steps_;
  loss_ += mean_loss;
  samples_ += global_samples;
  times_ += times;
}

std::optional<v1::WorkerProgress> ProgressReporter::MaybeReport(const ProgressPoint& p) {
  const bool due = (o_.log_every > 0 && p.step % o_.log_every == 0) || p.step == p.total_steps;
  if (!due || steps_ == 0) return std::nullopt;
  const double elapsed =
      std::max(0.0, absl::ToDoubleSeconds(absl::Now() - start_ - excluded_));
  const double n = static_cast<double>(steps_);
  const double per_step = elapsed / n;
  const double rate = elapsed > 0 ? static_cast<double>(samples_) / elapsed : 0;
  v1::WorkerProgress r;
  r.set_step(p.step);
  r.set_epoch(p.epoch);
  r.set_samples_seen(p.samples_in_epoch);
  r.set_global_batch(p.global_batch);
  r.set_local_batch(p.world > 0 ? p.global_batch / p.world : 0);
  r.set_local_grad_sq(p.local_grad_sq);
  r.set_global_grad_sq(p.global_grad_sq);
  r.set_loss(loss_ / n);
  r.set_step_seconds(per_step);
  r.set_data_wait_seconds(times_.data_wait / n);
  r.set_samples_per_second(rate);
  if (o_.print && o_.log_every > 0 && o_.sink) {
    const bool tokens = o_.tokens_per_sample > 0;
    // --batch auto: this window's gradient noise scale, from the norms at
    // the per-rank and the global batch (what the coordinator decides on).
    std::string noise;
    const double b = p.world > 0 ? static_cast<double>(p.global_batch) / p.world : 0;
    const double big = static_cast<double>(p.global_batch);
    if (p.local_grad_sq >= 0 && p.global_grad_sq >= 0 && b > 0 && big > b) {
      const double g2 = (big * p.global_grad_sq - b * p.local_grad_sq) / (big - b);
      const double sn = (p.local_grad_sq - p.global_grad_sq) / (1 / b - 1 / big);
      if (g2 > 0) noise = absl::StrFormat(" noise %.0f", std::max(0.0, sn) / g2);
    }
    o_.sink(absl::StrFormat(
        "step %d/%d epoch %d loss %.4f lr %.4f %s %.0f ms/step %.1f data-wait %.1f%% batch %d%s "
        "world %d eta %s",
        static_cast<long long>(p.step), static_cast<long long>(p.total_steps),
        static_cast<long long>(p.epoch), loss_ / n, p.lr, tokens ? "tokens/s" : "samples/s",
        tokens ? rate * static_cast<double>(o_.tokens_per_sample) : rate, per_step * 1e3,
        elapsed > 0 ? 100.0 * times_.data_wait / elapsed : 0.0,
        static_cast<long long>(p.global_batch), noise, p.world,
        FormatEta(per_step * static_cast<double>(p.total_steps - p.step))));
    if (o_.profile) {
      StepTimes mean = times_;
      mean.forward /= n;
      mean.backward /= n;
      mean.comm_wait /= n;
      mean.optimizer /= n;
      mean.data_wait /= n;
      mean.total /= n;
      o_.sink(FormatProfile(mean));
    }
  }
  Restart();
  return r;
}

}  // namespace worker
}  // namespace tandem
