// StepOwnedShard: the step every strategy that steps on the workers ends
// FinishStep with, once its gradients are summed: check the step context,
// CheckGradients over the owned range (non-finite skip, the global norm,
// one clip factor on every rank), then the optimizer (or the device
// stepper) over the owned parameters. allreduce and compressed own the whole
// vector; zero1/2/3 their 1/N shard.
//
//   OwnedShard s{"allreduce sync", rank, world, &clip, {0, n}, &ready_ranges,
//                grads, params, optimizer.get(), stepper};
//   RETURN_IF_ERROR(StepOwnedShard(s, context, step, guard.grad_scale(),
//                                  guard.options(), &report));
//
// Thread-compatible (the trainer thread's FinishStep). Collective when the
// clip or the non-finite check needs the norm of every rank (CheckGradients).
#ifndef TANDEM_COMMON_SYNC_STEP_OWNED_SHARD_H_
#define TANDEM_COMMON_SYNC_STEP_OWNED_SHARD_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"
#include "common/sync/grad_clip.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

// What a strategy's sharded step works on, fixed at creation (everything
// borrowed from the strategy, which outlives it).
struct OwnedShard {
  absl::string_view label;
  int rank = 0;
  int world = 1;
  GradClip* clip = nullptr;
  optim::ParamRange owned;
  const std::vector<std::pair<int64_t, int64_t>>* ready_ranges = nullptr;
  const float* grads = nullptr;           // the reduced gradients of `owned`
  float* params = nullptr;                // the model's flat parameters
  optim::Optimizer* optimizer = nullptr;  // over `owned`
  // Device memory: the norm and the step go through it (grads / params are
  // device pointers); null: the host optimizer on host memory.
  optim::DeviceStepper* stepper = nullptr;
  // Set: the sum of squares of the whole owned gradients, already known
  // (the allreduce strategy's shm reduce computes it in its pass), so the
  // check makes no pass of its own; the per-range search of a non-finite
  // step still does. Null: one pass over `owned` here.
  const double* owned_sum_sq = nullptr;
};

// One step of `shard` with FinishStep's `context` (`step` = the strategy's
// count, for messages), the gradients summed over ranks and scaled by
// context.grad_scale * extra_scale / world before clipping. The context is
// checked on every rank, even one that owns nothing, so a bad one fails
// everywhere instead of leaving the others in a collective. *report gets
// the verdict (applied or skipped); a skipped step touches nothing.
absl::Status StepOwnedShard(const OwnedShard& shard, const optim::StepContext& context,
                            int64_t step, double extra_scale, const StepOptions& options,
                            StepReport* report);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_STEP_OWNED_SHARD_H_
