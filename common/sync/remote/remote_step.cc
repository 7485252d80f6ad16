#include "common/sync/remote/remote_step.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace sync {

absl::StatusOr<bool> RemoteStep::Begin(const StepOptions& options) {
  RETURN_IF_ERROR(guard_.CheckBegin(options));
  RETURN_IF_ERROR(guard_.Started(absl::OkStatus(), options));
  if (!initialised_ || o_.learning_rate == nullptr) return false;
  pushed_lr_ = o_.learning_rate(next_step_);
  return std::isfinite(pushed_lr_);  // NaN: not known yet
}

absl::Status RemoteStep::Prepare(const optim::StepContext& ctx) {
  if (ctx.step < 1 || !std::isfinite(ctx.lr)) {
    return absl::InvalidArgumentError(absl::StrCat(o_.label, ": bad step context (step ",
                                                   ctx.step, ", lr ", ctx.lr, ")"));
  }
  if (ctx.grad_scale != 1.0f) {
    return absl::UnimplementedError(
        absl::StrCat(o_.label, ": a step-context grad_scale (loss scaling) is not supported"));
  }
  if (!initialised_) {
    // The first step of the generation: rank 0 hands the servers the
    // parameters every rank holds now; nobody pushes before they have them.
    RETURN_IF_ERROR(o_.servers->InitServers(o_.world->rank(), ctx.step - 1, o_.params));
    RETURN_IF_ERROR(o_.world->Barrier());
    initialised_ = true;
    next_step_ = ctx.step;
  }
  if (ctx.step != next_step_) {
    return absl::FailedPreconditionError(absl::StrCat(o_.label, ": FinishStep for step ",
                                                      ctx.step,
                                                      " but this generation's next step is ",
                                                      next_step_));
  }
  return absl::OkStatus();
}

absl::Status RemoteStep::CheckPushedLr(const optim::StepContext& ctx) const {
  if (ctx.lr == pushed_lr_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      o_.label, ": the learning rate of step ", ctx.step, " is ", ctx.lr,
      " but the schedule in SyncEnv gave ", pushed_lr_, " (pushed with the gradients)"));
}

shard::PushHeader RemoteStep::Header(int64_t step, float lr) const {
  shard::PushHeader h;
  h.generation = o_.generation;
  h.step = step;
  h.rank = o_.world->rank();
  h.weight = o_.weight;
  h.learning_rate = lr;
  h.grad_scale = guard_.grad_scale();
  h.int8_chunk = o_.int8_chunk;
  return h;
}

absl::Status RemoteStep::Fail(absl::Status s) {
  return guard_.Record(absl::Status(
      s.code(), absl::StrCat(o_.label, ", rank ", o_.world->rank(), ": ", s.message())));
}

}  // namespace sync
}  // namespace tandem
