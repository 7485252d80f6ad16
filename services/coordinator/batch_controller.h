// BatchController: dynamic batch sizing (`--batch auto[:min,max]`), the
// Pollux / AdaptDL idea. From the workers' reports it keeps
//  - the gradient noise scale B_noise = S / |G|^2 (McCandlish et al.), from
//    the squared norm of the gradient at two batch sizes every step gives
//    for free: each rank's local gradient (batch b) and the allreduced one
//    (batch B = b x world). Unbiased per-report estimates
//      |G|^2 ~ (B |g_B|^2 - b |g_b|^2) / (B - b)
//      S     ~ (|g_b|^2 - |g_B|^2) / (1/b - 1/B)
//    are averaged (exponentially) and their ratio taken, which is far less
//    noisy than averaging ratios;
//  - the measured throughput (samples/s) at each global batch tried;
// and picks the global batch M in [min, max] (a multiple of the world size,
// so every rank gets the same per-rank batch) maximising
//     goodput(M) = throughput(M) x efficiency(M),
//     efficiency(M) = (B_noise + M0) / (B_noise + M),
// the statistical efficiency per sample at M relative to the batch M0 the
// learning rate was tuned for (a batch k times larger needs about
// (B_noise + M)/(B_noise + M0) times as many samples for the same progress).
// Throughput at untried sizes comes from a ThroughputModel: tests pass a
// fake; FittedThroughput fits step time = a + c x M to what was measured.
//
//   BatchController c(options);                         // min, max, M0
//   c.Observe({.global_batch = 128, .local_batch = 64, ...});
//   FittedThroughput model = c.Fitted();
//   BatchDecision d = c.Decide(model, /*world=*/2);     // d.global_batch
//
// Thread-compatible (the coordinator calls it under its mutex). Options are
// checked by ValidateBatchControllerOptions (min <= max, both >= 1).
#ifndef TANDEM_SERVICES_COORDINATOR_BATCH_CONTROLLER_H_
#define TANDEM_SERVICES_COORDINATOR_BATCH_CONTROLLER_H_

#include <cstdint>
#include <map>

#include "absl/status/status.h"

namespace tandem {

struct BatchControllerOptions {
  int64_t min_global_batch = 1;
  int64_t max_global_batch = 1;
  // The global batch the learning rate was tuned for (efficiency 1).
  int64_t reference_batch = 1;
  // Weight of a new report in the noise-scale averages.
  double ema = 0.2;
  // Reports at one batch size before a decision may move away from it.
  int reports_per_decision = 3;
  // A move needs this relative goodput gain (no dithering on noise).
  double min_gain = 0.05;
  // With throughput measured at one size only: the share of the step that
  // does not grow with the batch (a prior until a second size is measured).
  double fixed_share_prior = 0.3;
};

absl::Status ValidateBatchControllerOptions(const BatchControllerOptions& o);

// What one report says about one optimizer step window.
struct BatchObservation {
  int64_t global_batch = 0;        // B: samples per optimizer step, all ranks
  int64_t local_batch = 0;         // b: one rank's samples per step
  double samples_per_second = 0;   // measured at B
  double local_grad_sq = -1;       // mean over ranks of |g_b|^2 (<0: unknown)
  double global_grad_sq = -1;      // |g_B|^2 of the averaged gradient (<0: unknown)
};

// Samples per second the job would train at with global batch M.
class ThroughputModel {
 public:
  virtual ~ThroughputModel() = default;
  virtual double SamplesPerSecond(int64_t global_batch) const = 0;
};

// Step time = a + c x M, least squares over the sizes measured (their
// mean rates); one size: the fixed-share prior; none: constant 1.
class FittedThroughput final : public ThroughputModel {
 public:
  FittedThroughput(const std::map<int64_t, double>& measured, double fixed_share_prior);
  double SamplesPerSecond(int64_t global_batch) const override;
  double fixed_seconds() const { return a_; }
  double seconds_per_sample() const { return c_; }

 private:
  double a_ = 0;
  double c_ = 0;
  bool known_ = false;
};

struct BatchDecision {
  int64_t global_batch = 0;   // the choice (the current one when unchanged)
  bool changed = false;
  double noise_scale = -1;    // B_noise; < 0 while unknown
  double efficiency = 1;      // of the choice
  double throughput = 0;      // predicted samples/s of the choice
  double goodput = 0;         // throughput x efficiency
};

class BatchController {
 public:
  explicit BatchController(BatchControllerOptions options);

  void Observe(const BatchObservation& o);
  // The noise scale so far; < 0 until a report with two distinct batch
  // sizes and a positive |G|^2 estimate arrived.
  double noise_scale() const;
  double efficiency(int64_t global_batch) const;
  FittedThroughput Fitted() const;
  // The goodput maximum over multiples of `world` in [min, max] (the
  // nearest multiple when none fits). Keeps the current batch until it has
  // reports_per_decision reports and unless the gain is at least min_gain.
  BatchDecision Decide(const ThroughputModel& model, int world);
  int64_t current() const { return current_; }

 private:
  const BatchControllerOptions o_;
  double g2_ = 0, s_ = 0;       // averaged |G|^2 and S estimates
  bool have_noise_ = false;
  std::map<int64_t, double> rate_sum_;  // global batch -> sum of samples/s
  std::map<int64_t, int> rate_n_;
  int64_t current_ = 0;         // the batch of the latest report
  int reports_at_current_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_BATCH_CONTROLLER_H_
