// Gradient clipping by global L2 norm, computed from per-range partial sums
// of squares so that it works when gradients are sharded:
//
//   double partial = PartialSumOfSquares(my_grads);       // each rank, its range
//   comm->AllReduceSum(&partial, 1);                      // (sync layer)
//   ASSIGN_OR_RETURN(ClipResult clip, ComputeClip(partial, max_norm));
//   ctx.grad_scale = inv_loss_scale * clip.scale;         // fused into Step()
//
// Every rank feeds the same allreduced sum into ComputeClip(), so every rank
// gets the same factor bit for bit. The sharded total equals the unsharded
// one up to the rounding of adding doubles in a different order (relative
// difference ~1e-15; tested): squares of fp32 values are exact in double and
// accumulate in double.
//
//   global_norm = sqrt(total_sum_sq)
//   scale       = global_norm > max_norm ? float(max_norm / (global_norm + 1e-6)) : 1
//
// (the 1e-6 is torch.nn.utils.clip_grad_norm_'s). Thread-safe: pure functions.
// Failure: ComputeClip returns InvalidArgument for a non-finite
// max_norm, and FailedPrecondition for a non-finite norm (inf/NaN gradients:
// use the DynamicLossScaler for fp16, or lower the learning rate).
#ifndef TANDEM_COMMON_OPTIM_CLIP_H_
#define TANDEM_COMMON_OPTIM_CLIP_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tandem {
namespace optim {

// Sum of g[i]^2 over the range, accumulated in double (several independent
// accumulators, so the order is fixed for a given length and start).
double PartialSumOfSquares(absl::Span<const float> grads);

struct ClipResult {
  double global_norm = 0.0;  // sqrt(total_sum_sq)
  float scale = 1.0f;        // multiply gradients by this (1 if not clipped)
  bool clipped = false;
};

// max_norm <= 0 disables clipping (scale 1) but still reports the norm.
absl::StatusOr<ClipResult> ComputeClip(double total_sum_sq, double max_norm);

// grads[i] *= scale. Prefer folding the scale into StepContext::grad_scale,
// which saves this pass over memory.
void ScaleInPlace(absl::Span<float> grads, float scale);

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_CLIP_H_
