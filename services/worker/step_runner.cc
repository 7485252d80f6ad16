#include "services/worker/step_runner.h"

#include "absl/time/clock.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {
namespace {

double Since(absl::Time t) { return absl::ToDoubleSeconds(absl::Now() - t); }

}  // namespace

absl::StatusOr<StepOutput> StepRunner::Run(data::PrefetchClient& data, sync::GradientSync& sync,
                                           const optim::StepContext& ctx) {
  StepOutput out;
  StepTimes& times = out.times;
  const sync::SyncStats before = sync.stats();
  absl::Time t = absl::Now();
  RETURN_IF_ERROR(sync.BeforeForward());
  times.comm_wait += Since(t);
  sync::GradientSync* s = &sync;
  float loss_sum = 0;
  for (int m = 0; m < k_; ++m) {
    t = absl::Now();
    ASSIGN_OR_RETURN(const data::HostBatch* hb, data.Next());
    times.data_wait += Since(t);
    out.epoch_ended |= hb->last_in_epoch;
    if (sample_log_ != nullptr) sample_log_->Append(*hb, generation_, ctx.step);
    ASSIGN_OR_RETURN(nn::Batch batch, stager_->Stage(*hb));
    t = absl::Now();
    RETURN_IF_ERROR(model_->Forward(batch));
    times.forward += Since(t);
    t = absl::Now();
    const float beta = m == 0 ? 0.f : 1.f;
    if (m + 1 < k_) {
      RETURN_IF_ERROR(model_->Backward(beta, nullptr));
    } else {
      RETURN_IF_ERROR(sync.BeginStep(sync::StepOptions{1.f / static_cast<float>(k_)}));
      // A lambda of one pointer: std::function keeps it inline, no allocation.
      RETURN_IF_ERROR(model_->Backward(
          beta, [s](const nn::GradRange& r) { s->OnGradientsReady(r.lo, r.hi); }));
    }
    // Reading the loss waits for the device's backward (no-op wait on CPU).
    float loss = 0;
    RETURN_IF_ERROR(backend_->CopyToHost(&loss, model_->loss(), sizeof(float)));
    times.backward += Since(t);
    loss_sum += loss;
    out.samples += batch.size;
  }
  RETURN_IF_ERROR(sync.FinishStep(ctx));
  const sync::SyncStats after = sync.stats();
  times.comm_wait += after.exposed_wait_seconds - before.exposed_wait_seconds;
  times.optimizer += after.optimizer_seconds - before.optimizer_seconds;
  out.mean_loss = loss_sum / static_cast<float>(k_);
  out.cursor = data.cursor();
  return out;
}

}  // namespace worker
}  // namespace tandem
