// ProgressReporter: rank 0's console lines and every rank's progress record
// for the coordinator, over windows of --log_every steps.
//
//   step 120/1874 epoch 1 loss 0.5123 lr 0.1000 samples/s 9874 ms/step 13.0
//     data-wait 0.2% world 2 eta 0:00:23
//   profile ms/step: forward 3.1 backward 6.2 comm-wait 0.4 optimizer 1.1 data-wait 0.0
//     other 2.2                                  (with --profile)
//
// The loss is the mean over all ranks (the trainer sums it over the control
// mesh with the per-step flags). GPT runs count tokens/s instead of
// samples/s. Time spent evaluating or checkpointing is excluded with
// Exclude() so rates count training only.
//
// Thread-compatible (the trainer thread). Printing goes through the `print`
// callback given at construction.
#ifndef TANDEM_SERVICES_WORKER_PROGRESS_H_
#define TANDEM_SERVICES_WORKER_PROGRESS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace tandem {
namespace worker {

// Where one step's wall time went, in seconds on this rank.
struct StepTimes {
  double forward = 0;
  double backward = 0;
  double comm_wait = 0;   // FinishStep waiting for communication (exposed)
  double optimizer = 0;   // clipping + the optimizer step
  double data_wait = 0;   // waiting for the next batch
  double total = 0;       // the whole step, agreement included
  StepTimes& operator+=(const StepTimes& o);
};

struct ProgressOptions {
  int log_every = 50;           // 0 = no console lines (records still made)
  bool profile = false;
  bool print = false;           // this rank prints (rank 0)
  int64_t tokens_per_sample = 0;  // > 0: report tokens/s
  std::function<void(const std::string&)> sink;  // one line, no newline
};

struct ProgressPoint {
  int64_t step = 0;
  int64_t total_steps = 0;
  int64_t epoch = 0;           // 1-based epoch the step trained in
  int64_t samples_in_epoch = 0;
  double lr = 0;
  int world = 1;
  int64_t global_batch = 0;    // samples per optimizer step, all ranks
  // Dynamic batch sizing: the window's mean |g_local|^2 and |g_global|^2
  // (see WorkerProgress); < 0 when not measured.
  double local_grad_sq = -1;
  double global_grad_sq = -1;
};

class ProgressReporter {
 public:
  explicit ProgressReporter(ProgressOptions options);

  // Starts a window now (a new generation, or after a report).
  void Restart();
  // One finished step: mean loss over ranks, samples over all ranks.
  void AddStep(double mean_loss, int64_t global_samples, const StepTimes& times);
  // Time that is not training (evaluation, checkpoints) in this window.
  void Exclude(absl::Duration d) { excluded_ += d; }
  // At a window's end (every log_every steps and at the last step): prints
  // rank 0's lines and returns the record for the coordinator.
  std::optional<v1::WorkerProgress> MaybeReport(const ProgressPoint& point);

 private:
  const ProgressOptions o_;
  absl::Time start_;
  absl::Duration excluded_;
  int64_t steps_ = 0;
  double loss_ = 0;
  int64_t samples_ = 0;
  StepTimes times_;
};

// "0:02:31" for a duration in seconds (hours unbounded).
std::string FormatEta(double seconds);

// The --profile line for per-step mean times (seconds).
std::string FormatProfile(const StepTimes& mean);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_PROGRESS_H_
