// CheckGradients: what a step finisher does between "communication done"
// and "optimizer step" — measure the summed gradients it holds, agree with
// the other shards, and decide: apply (with the clip factor), or skip a
// step whose gradients are non-finite on any rank. Shared by the strategies
// that step on the workers (allreduce, zero*, compressed).
//
//   GradCheck c;
//   ASSIGN_OR_RETURN(c, CheckGradients(clip_, guard_.options(), scale, owned_, ranges_,
//                                      [&](int64_t lo, int64_t hi) -> absl::StatusOr<double> {
//                                        return optim::PartialSumOfSquares(...);
//                                      }));
//   report_ = c.report;
//   if (!c.report.applied) return absl::OkStatus();   // nothing stepped
//   scale *= c.clip_scale;
//
// Nothing is computed when clipping is off and the step asked for neither
// skip_non_finite nor measure_grad_norm. The sum of squares is one pass
// over the owned gradients (fp32 squares accumulated in double, so it is
// non-finite exactly when a gradient is); when it is non-finite and
// skipping was asked, each ready range inside the owned part is summed
// again to find the one nearest the input (the slow path of a bad step).
// The shards' sums and bad-range indices are combined in one allgather of
// two doubles (GradClip::Combine), so every rank reaches the same decision.
//
// Thread-compatible: the trainer thread. Failure: the sum callback's or the
// allgather's error; a non-finite norm with clipping on and skipping off is
// FailedPrecondition (as ComputeClip); without either the update goes ahead
// as it always did (report.applied true, grad_sum_sq non-finite).
#ifndef TANDEM_COMMON_SYNC_GRAD_CHECK_H_
#define TANDEM_COMMON_SYNC_GRAD_CHECK_H_

#include <cstdint>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/optim/optimizer.h"
#include "common/sync/grad_clip.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

struct GradCheck {
  StepReport report;       // what last_step() returns for this step
  double clip_scale = 1;   // multiply the step's scale by this
};

// `scale`: what the gradients will be multiplied by (grad_scale /
// world_size); `owned`: the flat range whose summed gradients this rank
// holds; `ranges`: the backward-order ready ranges (SyncEnv's);
// `sum_sq(lo, hi)`: the sum of squares of the held gradients of flat
// [lo, hi), a sub-range of `owned`.
absl::StatusOr<GradCheck> CheckGradients(
    GradClip& clip, const StepOptions& options, double scale, optim::ParamRange owned,
    absl::Span<const std::pair<int64_t, int64_t>> ranges,
    absl::FunctionRef<absl::StatusOr<double>(int64_t lo, int64_t hi)> sum_sq);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_GRAD_CHECK_H_
