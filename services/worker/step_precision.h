// StepPrecision: a worker's numeric policy for each optimizer step —
// --precision fp32 | bf16 | fp16 and what happens to a step whose
// gradients are inf / NaN.
//
//   ASSIGN_OR_RETURN(auto p, StepPrecision::Create(MakeStepPrecisionOptions(o), backend, model));
//   model->Backward(beta, [&](const nn::GradRange& r) { p->OnRange(step, r); ... },
//                   p->loss_scale());
//   sync->BeginStep(p->StepOptionsFor(accumulation));  ... sync->FinishStep(ctx);
//   ASSIGN_OR_RETURN(StepVerdict v, p->AfterStep(step, sync->last_step()));
//
// The modes (fp32 master weights and optimizer state in every mode):
//   fp32  gradients as computed.
//   bf16  GEMMs in bf16 on a device that has it (the CUDA backend's tensor
//         cores; the CPU backend computes every mode in fp32), and each
//         gradient range rounded to bf16 as backward reports it, so the
//         sync and the optimizer see bf16 gradients.
//   fp16  the loss is multiplied by a dynamic loss scale before backward
//         (optim::DynamicLossScaler), each gradient range is rounded to fp16
//         (values beyond fp16's range become inf, as fp16 storage makes
//         them), and the step unscales by 1 / scale. A step with inf / NaN
//         anywhere is skipped on every rank and the scale halves; after
//         growth_interval clean steps it doubles.
// In every mode with check_non_finite (the default) the strategy checks the
// summed gradients (StepOptions::skip_non_finite, agreed across ranks): a
// bad step is skipped, parameters and optimizer state untouched, and after
// max_non_finite_steps skips in a row the job stops with an error naming
// the first layer (in forward order) whose gradients were non-finite.
//
// Thread-safety: OnRange runs on the backward thread between BeginStep and
// FinishStep; everything else on the trainer thread, never concurrently
// with OnRange. Borrows the backend and the model; allocates its rounding
// buffer once (the largest range) in Create, nothing per step.
#ifndef TANDEM_SERVICES_WORKER_STEP_PRECISION_H_
#define TANDEM_SERVICES_WORKER_STEP_PRECISION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "common/optim/loss_scaler.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace worker {

enum class Precision { kFp32, kBf16, kFp16 };

// "fp32" | "bf16" | "fp16", else InvalidArgument naming --precision.
absl::StatusOr<Precision> ParsePrecision(absl::string_view text);
const char* PrecisionName(Precision p);

struct StepPrecisionOptions {
  Precision precision = Precision::kFp32;
  bool check_non_finite = true;      // skip steps with inf / NaN gradients
  int64_t max_non_finite_steps = 20;  // skips in a row before the job stops (>= 1)
  float initial_loss_scale = 65536;  // fp16
  int64_t loss_scale_growth_interval = 2000;  // fp16: clean steps before doubling
  // Fault injection for tests: (step, rank) pairs whose first reported
  // gradient range gets an inf before the strategy sees it (rank -1 = all).
  std::vector<std::pair<int64_t, int>> inject_non_finite;
};

// What the step finally did.
struct StepVerdict {
  bool applied = true;
  std::string skipped_because;  // when skipped: the layer and the loss-scale change
};

class StepPrecision {
 public:
  static absl::StatusOr<std::unique_ptr<StepPrecision>> Create(const StepPrecisionOptions& options,
                                                               kernels::Backend* backend,
                                                               nn::Model* model);

  // This generation's rank (for fault injection); trainer thread.
  void set_rank(int rank) { rank_ = rank; }

  Precision precision() const { return options_.precision; }
  // Multiplies the loss before backward (1 except fp16).
  float loss_scale() const { return scaler_.has_value() ? scaler_->scale() : 1.f; }
  // The sync's options for the next step of `accumulation` micro-batches.
  sync::StepOptions StepOptionsFor(int accumulation) const;

  // Backward thread: range `r` of this step's gradients is final. Rounds
  // it to the mode's precision (and injects a fault when asked) before the
  // caller hands it to the strategy.
  void OnRange(int64_t step, const nn::GradRange& r);

  // After FinishStep: records the outcome (the loss scale's change, the
  // count of skips in a row). FailedPrecondition naming the layer after
  // max_non_finite_steps skips in a row, or when the loss scaler gives up.
  absl::StatusOr<StepVerdict> AfterStep(int64_t step, const sync::StepReport& report);

  int64_t skipped_steps() const { return skipped_; }

  // fp16's loss-scaler state for checkpoints (empty in the other modes);
  // Restore ignores an empty record (a checkpoint of another mode).
  std::string SerializeState() const;
  absl::Status RestoreState(absl::string_view bytes);

 private:
  StepPrecision(const StepPrecisionOptions& options, kernels::Backend* backend, nn::Model* model);

  const StepPrecisionOptions options_;
  kernels::Backend* const backend_;
  nn::Model* const model_;
  int rank_ = 0;
  std::optional<optim::DynamicLossScaler> scaler_;  // fp16 only
  kernels::DeviceBuffer half_;  // bf16 / fp16: the largest range as 16-bit
  std::vector<std::string> range_names_;  // per ready range: its first parameter's layer
  int64_t skipped_ = 0;
  int64_t skips_in_a_row_ = 0;
  std::string first_bad_layer_;  // of the current run of skips
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_STEP_PRECISION_H_
