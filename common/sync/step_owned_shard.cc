#include "common/sync/step_owned_shard.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/optim/clip.h"
#include "common/sync/grad_check.h"
#include "common/trace/trace.h"

namespace tandem {
namespace sync {

absl::Status StepOwnedShard(const OwnedShard& shard, const optim::StepContext& context,
                            int64_t step, double extra_scale, const StepOptions& options,
                            StepReport* report) {
  trace::Span span("optimizer", "compute");
  if (context.step < 1 || !std::isfinite(context.lr)) {
    return absl::InvalidArgumentError(absl::StrCat(shard.label, ": bad step context at step ", step,
                                                   " (step ", context.step, ", lr ", context.lr,
                                                   ")"));
  }
  const float* g = shard.grads;
  const optim::ParamRange owned = shard.owned;
  const double scale = static_cast<double>(context.grad_scale) * extra_scale / shard.world;
  absl::StatusOr<GradCheck> check = CheckGradients(
      *shard.clip, options, scale, owned, *shard.ready_ranges,
      [&](int64_t lo, int64_t hi) -> absl::StatusOr<double> {
        if (shard.owned_sum_sq != nullptr && lo == owned.lo && hi == owned.hi) {
          return *shard.owned_sum_sq;
        }
        if (shard.stepper != nullptr) return shard.stepper->SumOfSquares(g + (lo - owned.lo), hi - lo);
        return optim::PartialSumOfSquares(absl::MakeConstSpan(g + (lo - owned.lo), hi - lo));
      });
  if (!check.ok()) {
    return absl::Status(check.status().code(),
                        absl::StrCat(shard.label, ": gradient norm at step ", step, " on rank ",
                                     shard.rank, ": ", check.status().message()));
  }
  *report = check->report;
  if (!report->applied || owned.size() == 0) return absl::OkStatus();
  optim::StepContext ctx = context;
  ctx.grad_scale = static_cast<float>(scale * check->clip_scale);
  absl::Status st =
      shard.stepper != nullptr
          ? shard.stepper->Step(shard.params + owned.lo, g, owned.size(), ctx)
          : shard.optimizer->Step(shard.params + owned.lo, g, owned.size(), ctx);
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat(shard.label, ": optimizer ", shard.optimizer->name(),
                                              " on [", owned.lo, ", ", owned.hi, ") at step ", step,
                                              ": ", st.message()));
}

}  // namespace sync
}  // namespace tandem
