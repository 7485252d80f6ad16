// StepRunner: one optimizer step on this rank — the strategy's
// BeforeForward, `accumulation` micro-batches of forward and backward (only
// the last one reports gradient ranges to the strategy, so accumulation
// costs no communication), and the strategy's FinishStep, under the step's
// numeric policy (StepPrecision: loss scale, gradient rounding, skipping a
// step with non-finite gradients) — with where the
// time went (forward, backward, data wait, exposed communication wait,
// optimizer). See common/sync/gradient_sync.h for the step protocol.
//
//   StepRunner runner(model, backend, stager, accumulation);
//   ASSIGN_OR_RETURN(StepOutput out, runner.Run(*g.data, *g.sync, ctx));
//
// Thread-compatible (the trainer thread; the backward callback runs on the
// backward thread and only hands ranges to the strategy). Borrows
// everything. Allocates nothing per step. Failure: the first error of the
// data stream, the model or the strategy; parameters are then unchanged or
// fully updated (the strategy never applies a partial update).
#ifndef TANDEM_SERVICES_WORKER_STEP_RUNNER_H_
#define TANDEM_SERVICES_WORKER_STEP_RUNNER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/data/prefetch_client.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "common/sync/gradient_sync.h"
#include "services/worker/batch_stager.h"
#include "services/worker/progress.h"
#include "services/worker/sample_log.h"
#include "services/worker/step_precision.h"

namespace tandem {
namespace worker {

struct StepOutput {
  float mean_loss = 0;       // this rank's mean over its micro-batches
  int64_t samples = 0;       // this rank's samples
  bool epoch_ended = false;  // a micro-batch was the epoch's last
  data::Cursor cursor;       // the stream's position after the step
  StepTimes times;           // total left 0: the caller adds the agreement
  StepVerdict verdict;       // applied, or skipped for non-finite gradients
  // With set_measure_noise: this rank's sum of squared gradients before the
  // sync (the local batch's, accumulated micro-batches summed, loss scale
  // included) and the synced sum's (GradientSync::last_step); else -1.
  double local_grad_sum_sq = -1;
  double global_grad_sum_sq = -1;
};

class StepRunner {
 public:
  StepRunner(nn::Model* model, kernels::Backend* backend, BatchStager* stager, int accumulation)
      : model_(model), backend_(backend), stager_(stager), k_(accumulation) {}

  // Optional audit trail of the batches trained on (--sample_log); borrowed.
  void set_sample_log(SampleLog* log, int64_t generation) {
    sample_log_ = log;
    generation_ = generation;
  }

  // The step's numeric policy (--precision, non-finite skips); borrowed.
  // Null: fp32, gradients unchecked.
  void set_precision(StepPrecision* precision) { precision_ = precision; }

  // Test aid (--debug_extra_compute_ms / --debug_extra_data_ms): sleep this
  // long in each step's first forward pass and before each batch is taken.
  void set_debug_delays(absl::Duration compute, absl::Duration data) {
    extra_compute_ = compute;
    extra_data_ = data;
  }

  // Dynamic batch sizing (--batch auto): measure the gradient's squared
  // norm before and after the sync, the two batch sizes the gradient noise
  // scale is estimated from. Host-accessible gradients only (a no-op on a
  // device backend).
  void set_measure_noise(bool on) { measure_noise_ = on && backend_->host_accessible(); }

  absl::StatusOr<StepOutput> Run(data::PrefetchClient& data, sync::GradientSync& sync,
                                 const optim::StepContext& ctx);

 private:
  // The backward callback (backward thread): rounds the range, hands it on.
  void OnRange(const nn::GradRange& r);

  nn::Model* const model_;
  kernels::Backend* const backend_;
  BatchStager* const stager_;
  const int k_;
  SampleLog* sample_log_ = nullptr;
  int64_t generation_ = 0;
  StepPrecision* precision_ = nullptr;
  // The step in progress, for OnRange (set before backward).
  sync::GradientSync* sync_ = nullptr;
  int64_t step_ = 0;
  bool measure_noise_ = false;
  absl::Duration extra_compute_;
  absl::Duration extra_data_;
  double local_sum_sq_ = 0;  // over the ranges seen this step (backward thread)
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_STEP_RUNNER_H_
