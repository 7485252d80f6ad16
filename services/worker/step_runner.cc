#include "services/worker/step_runner.h"

#include "absl/time/clock.h"
#include "common/status/status_macros.h"
#include "common/trace/trace.h"

namespace tandem {
namespace worker {
namespace {

double Since(absl::Time t) { return absl::ToDoubleSeconds(absl::Now() - t); }

// The next batch; `extra` first, inside the data wait (a straggler on
// purpose, tests: the sleep is the behaviour under test).
absl::StatusOr<const data::HostBatch*> NextBatch(data::PrefetchClient& data, absl::Duration extra) {
  trace::Span span("data wait", "data");
  if (extra > absl::ZeroDuration()) absl::SleepFor(extra);
  return data.Next();
}

}  // namespace

void StepRunner::OnRange(const nn::GradRange& r) {
  if (precision_ != nullptr) precision_->OnRange(step_, r);
  if (measure_noise_) {
    // Before the sync touches the range: this rank's own gradient.
    const float* g = model_->storage().grads();
    double sum = 0;
    for (int64_t i = r.lo; i < r.hi; ++i) sum += static_cast<double>(g[i]) * g[i];
    local_sum_sq_ += sum;
  }
  sync_->OnGradientsReady(r.lo, r.hi);
}

absl::StatusOr<StepOutput> StepRunner::Run(data::PrefetchClient& data, sync::GradientSync& sync,
                                           const optim::StepContext& ctx) {
  StepOutput out;
  StepTimes& times = out.times;
  const sync::SyncStats before = sync.stats();
  absl::Time t = absl::Now();
  {
    trace::Span span("before forward", "comm");
    RETURN_IF_ERROR(sync.BeforeForward());
  }
  times.comm_wait += Since(t);
  sync_ = &sync;
  step_ = ctx.step;
  const float loss_scale = precision_ != nullptr ? precision_->loss_scale() : 1.f;
  float loss_sum = 0;
  for (int m = 0; m < k_; ++m) {
    t = absl::Now();
    ASSIGN_OR_RETURN(const data::HostBatch* hb, NextBatch(data, extra_data_));
    times.data_wait += Since(t);
    out.epoch_ended |= hb->last_in_epoch;
    if (sample_log_ != nullptr) sample_log_->Append(*hb, generation_, ctx.step);
    ASSIGN_OR_RETURN(nn::Batch batch, stager_->Stage(*hb));
    t = absl::Now();
    {
      trace::Span span("forward", "compute");
      RETURN_IF_ERROR(model_->Forward(batch));
      if (m == 0 && extra_compute_ > absl::ZeroDuration()) absl::SleepFor(extra_compute_);
    }
    times.forward += Since(t);
    t = absl::Now();
    trace::Span backward("backward", "compute");
    const float beta = m == 0 ? 0.f : 1.f;
    if (m + 1 < k_) {
      RETURN_IF_ERROR(model_->Backward(beta, nullptr, loss_scale));
    } else {
      sync::StepOptions so;
      so.grad_scale = 1.f / static_cast<float>(k_);
      if (precision_ != nullptr) so = precision_->StepOptionsFor(k_);
      if (measure_noise_) so.measure_grad_norm = true;
      so.context = ctx;  // the one FinishStep gets below
      local_sum_sq_ = 0;
      RETURN_IF_ERROR(sync.BeginStep(so));
      // A lambda of one pointer: std::function keeps it inline, no allocation.
      RETURN_IF_ERROR(
          model_->Backward(beta, [this](const nn::GradRange& r) { OnRange(r); }, loss_scale));
    }
    // Reading the loss waits for the device's backward (no-op wait on CPU).
    float loss = 0;
    RETURN_IF_ERROR(backend_->CopyToHost(&loss, model_->loss(), sizeof(float)));
    times.backward += Since(t);
    loss_sum += loss;
    out.samples += batch.size;
  }
  {
    trace::Span span("finish step", "comm");  // exposed communication wait, then optimizer
    RETURN_IF_ERROR(sync.FinishStep(ctx));
  }
  if (precision_ != nullptr) {
    ASSIGN_OR_RETURN(out.verdict, precision_->AfterStep(ctx.step, sync.last_step()));
  }
  const sync::SyncStats after = sync.stats();
  times.comm_wait += after.exposed_wait_seconds - before.exposed_wait_seconds;
  times.optimizer += after.optimizer_seconds - before.optimizer_seconds;
  out.mean_loss = loss_sum / static_cast<float>(k_);
  if (measure_noise_) {
    out.local_grad_sum_sq = local_sum_sq_;
    out.global_grad_sum_sq = sync.last_step().grad_sum_sq;
  }
  out.cursor = data.cursor();
  return out;
}

}  // namespace worker
}  // namespace tandem
