#include "services/worker/worker_metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/kernels/blas_core.h"
#include "common/numeric/cpu_dispatch.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(
    Metrics* m, const std::string& strategy) {
  std::unique_ptr<WorkerMetrics> w(new WorkerMetrics());
  ASSIGN_OR_RETURN(w->step_seconds_, m->Histogram("tandem_step_seconds",
                                                  "Wall time of one optimizer step.",
                                                  Metrics::LatencyBuckets()));
  const char* phases[5] = {"forward", "backward", "comm_wait", "optimizer", "data_wait"};
  for (int i = 0; i < 5; ++i) {
    ASSIGN_OR_RETURN(w->phases_[i],
                     m->Counter("tandem_step_phase_seconds_total",
                                "Seconds of training steps spent in each phase.",
                                {{"phase", phases[i]}}));
  }
  ASSIGN_OR_RETURN(w->samples_,
                   m->Counter("tandem_samples_total", "Training samples this worker consumed."));
  ASSIGN_OR_RETURN(w->loss_, m->Gauge("tandem_loss", "Mean training loss over ranks, last step."));
  ASSIGN_OR_RETURN(w->sync_seconds_,
                   m->Counter("tandem_sync_seconds_total",
                              "Seconds the gradient-sync communication spent in collectives.",
                              {{"strategy", strategy}}));
  ASSIGN_OR_RETURN(w->sync_bytes_, m->Counter("tandem_sync_bytes_total",
                                              "Gradient bytes handed to the communicator.",
                                              {{"strategy", strategy}}));
  ASSIGN_OR_RETURN(w->inter_node_bytes_,
                   m->Counter("tandem_sync_inter_node_bytes_total",
                              "Gradient bytes handed to groups that span nodes.",
                              {{"strategy", strategy}}));
  const char* stages[2] = {"before", "after"};
  for (int i = 0; i < 2; ++i) {
    ASSIGN_OR_RETURN(w->compress_bytes_[i],
                     m->Counter("tandem_sync_compression_bytes_total",
                                "Gradient bytes given to codecs (before) and encoded (after).",
                                {{"strategy", strategy}, {"stage", stages[i]}}));
  }
  ASSIGN_OR_RETURN(w->compression_ratio_,
                   m->Gauge("tandem_sync_compression_ratio",
                            "Gradient bytes before / after compression, last step (0: none)."));
  ASSIGN_OR_RETURN(w->uncompressed_buckets_,
                   m->Counter("tandem_sync_uncompressed_buckets_total",
                              "Buckets a compressing strategy sent uncompressed (warm-up, small).",
                              {{"strategy", strategy}}));
  ASSIGN_OR_RETURN(w->residual_norm_,
                   m->Gauge("tandem_sync_residual_norm",
                            "L2 norm of this rank's error-feedback residuals after the last step."));
  ASSIGN_OR_RETURN(w->buckets_, m->Gauge("tandem_buckets", "Gradient collectives per step."));
  std::string core = kernels::OpenblasCoreName();
  if (core.empty()) core = "unknown";
  ASSIGN_OR_RETURN(prometheus::Gauge * kernels,
                   m->Gauge("tandem_cpu_kernels",
                            "1; the labels name the BLAS kernel set and tandem's vector width.",
                            {{"blas_core", core}, {"vector_width", numeric::VectorWidthName()}}));
  kernels->Set(1);
  const char* kinds[4] = {"params", "grads", "optimizer", "staging"};
  for (int i = 0; i < 4; ++i) {
    ASSIGN_OR_RETURN(w->memory_[i],
                     m->Gauge("tandem_sync_memory_bytes",
                              "Bytes this rank holds for the model, by kind (ZeRO shards them).",
                              {{"kind", kinds[i]}}));
  }
  ASSIGN_OR_RETURN(w->generation_,
                   m->Gauge("tandem_generation", "Generation this worker trains in."));
  ASSIGN_OR_RETURN(w->replica_bytes_,
                   m->Gauge("tandem_replica_bytes",
                            "Host memory held by the peer replicas of sharded state (own "
                            "snapshots and the ring neighbour's copy; zero1/2/3)."));
  ASSIGN_OR_RETURN(w->global_batch_,
                   m->Gauge("tandem_global_batch_size",
                            "Samples per optimizer step over all ranks (dynamic under --batch auto)."));
  ASSIGN_OR_RETURN(w->skipped_steps_,
                   m->Counter("tandem_skipped_steps_total",
                              "Steps skipped because their gradients held inf / NaN."));
  ASSIGN_OR_RETURN(w->loss_scale_,
                   m->Gauge("tandem_loss_scale", "Dynamic loss scale (fp16; 1 otherwise)."));
  ASSIGN_OR_RETURN(w->grad_norm_,
                   m->Gauge("tandem_grad_norm",
                            "L2 norm of the summed gradients, last step (when measured)."));
  return w;
}

void WorkerMetrics::RecordStep(const StepTimes& t, int64_t samples, double loss,
                               const sync::GradientSync& sync, sync::SyncStats* last) {
  const sync::SyncStats st = sync.stats();
  const sync::SyncMemory mem = sync.memory();
  const int64_t held[4] = {mem.param_bytes, mem.grad_bytes, mem.optimizer_bytes,
                           mem.staging_bytes};
  for (int i = 0; i < 4; ++i) memory_[i]->Set(static_cast<double>(held[i]));
  step_seconds_->Observe(t.total);
  const double phase[5] = {t.forward, t.backward, t.comm_wait, t.optimizer, t.data_wait};
  for (int i = 0; i < 5; ++i) phases_[i]->Increment(std::max(0.0, phase[i]));
  samples_->Increment(static_cast<double>(samples));
  loss_->Set(loss);
  sync_seconds_->Increment(std::max(0.0, st.comm_seconds - last->comm_seconds));
  sync_bytes_->Increment(static_cast<double>(std::max<int64_t>(0, st.bytes_sent - last->bytes_sent)));
  inter_node_bytes_->Increment(
      static_cast<double>(std::max<int64_t>(0, st.inter_node_bytes - last->inter_node_bytes)));
  const int64_t before = std::max<int64_t>(0, st.compress_bytes_before - last->compress_bytes_before);
  const int64_t after = std::max<int64_t>(0, st.compress_bytes_after - last->compress_bytes_after);
  compress_bytes_[0]->Increment(static_cast<double>(before));
  compress_bytes_[1]->Increment(static_cast<double>(after));
  compression_ratio_->Set(after > 0 ? static_cast<double>(before) / after : 0.0);
  uncompressed_buckets_->Increment(static_cast<double>(
      std::max<int64_t>(0, st.uncompressed_buckets - last->uncompressed_buckets)));
  residual_norm_->Set(st.residual_norm);
  if (st.steps > last->steps) {
    buckets_->Set(static_cast<double>(st.buckets - last->buckets) /
                  static_cast<double>(st.steps - last->steps));
  }
  *last = st;
}

std::string WorkerMetrics::CpuKernelsDescription() {
  const std::string core = kernels::OpenblasCoreName();
  return absl::StrCat("BLAS core ", core.empty() ? "unknown" : core, ", vector width ",
                      numeric::VectorWidthName());
}

void WorkerMetrics::RecordNumerics(bool skipped, float loss_scale, double grad_sum_sq) {
  if (skipped) skipped_steps_->Increment();
  loss_scale_->Set(loss_scale);
  if (grad_sum_sq >= 0) grad_norm_->Set(std::sqrt(grad_sum_sq));
}

void WorkerMetrics::SetGeneration(int64_t g) { generation_->Set(static_cast<double>(g)); }
void WorkerMetrics::SetReplicaBytes(int64_t b) { replica_bytes_->Set(static_cast<double>(b)); }
void WorkerMetrics::SetGlobalBatch(int64_t n) { global_batch_->Set(static_cast<double>(n)); }

}  // namespace worker
}  // namespace tandem
