// WorkerMetrics: the worker's Prometheus series, registered once (after the
// first join gave a rank label) and updated once per optimizer step from
// values the trainer already has — no allocation, no lock beyond the
// client library's atomics.
//
//   tandem_step_seconds                 histogram of a step's wall time
//   tandem_step_phase_seconds_total     {phase=forward|backward|comm_wait|optimizer|data_wait}
//   tandem_samples_total                samples this worker trained on
//   tandem_loss                         mean loss over ranks of the last step
//   tandem_sync_seconds_total           {strategy}: communication-thread busy time
//   tandem_sync_bytes_total             {strategy}: bytes handed to any communicator
//   tandem_sync_inter_node_bytes_total  {strategy}: of those, to groups spanning nodes
//   tandem_sync_compression_bytes_total {strategy, stage=before|after}: fp32 bytes given
//                                       to gradient codecs and the bytes they encoded to
//   tandem_sync_compression_ratio       before / after over the last step (0: none)
//   tandem_sync_uncompressed_buckets_total {strategy}: buckets a compressing strategy
//                                       sent uncompressed (warm-up, small buckets)
//   tandem_sync_residual_norm           L2 norm of this rank's error-feedback residuals
//   tandem_buckets                      collectives per step
//   tandem_generation                   generation this worker trains in
//   tandem_skipped_steps_total          steps skipped for inf / NaN gradients
//   tandem_loss_scale                   fp16's dynamic loss scale (1 otherwise)
//   tandem_grad_norm                    summed gradients' L2 norm, last step measured
//   tandem_sync_memory_bytes            {kind=params|grads|optimizer|staging}: held per rank
//   tandem_replica_bytes                host memory the peer replicas of sharded state hold
//   tandem_cpu_kernels                  1, labels blas_core (OpenBLAS's kernel set)
//                                       and vector_width (tandem's own loops)
//
// Thread-compatible (the trainer thread). The Metrics registry is borrowed
// and owns the series. Failure: registration errors from Create.
#ifndef TANDEM_SERVICES_WORKER_WORKER_METRICS_H_
#define TANDEM_SERVICES_WORKER_WORKER_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"
#include "common/sync/gradient_sync.h"
#include "services/worker/progress.h"

namespace tandem {
namespace worker {

class WorkerMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(Metrics* metrics,
                                                               const std::string& strategy);

  // One finished step; the strategy's cumulative SyncStats are compared
  // with `last`, their value at the previous call (updated), and its
  // memory() sets the per-rank memory gauges.
  void RecordStep(const StepTimes& times, int64_t samples, double loss,
                  const sync::GradientSync& sync, sync::SyncStats* last);
  void SetGeneration(int64_t generation);
  // tandem_replica_bytes (peer_replica.h).
  void SetReplicaBytes(int64_t bytes);
  // tandem_global_batch_size: samples per optimizer step over all ranks
  // (changes under --batch auto / --batch_schedule).
  void SetGlobalBatch(int64_t samples);
  // The step's numerics: skipped or not, the loss scale for the next step,
  // and the summed gradients' squared norm (negative: not measured).
  void RecordNumerics(bool skipped, float loss_scale, double grad_sum_sq);

  // "BLAS core Zen, vector width avx2": what this process computes with.
  static std::string CpuKernelsDescription();

 private:
  WorkerMetrics() = default;
  prometheus::Histogram* step_seconds_ = nullptr;
  std::array<prometheus::Counter*, 5> phases_{};
  prometheus::Counter* samples_ = nullptr;
  prometheus::Gauge* loss_ = nullptr;
  prometheus::Counter* sync_seconds_ = nullptr;
  prometheus::Counter* sync_bytes_ = nullptr;
  prometheus::Counter* inter_node_bytes_ = nullptr;
  std::array<prometheus::Counter*, 2> compress_bytes_{};  // before, after
  prometheus::Gauge* compression_ratio_ = nullptr;
  prometheus::Counter* uncompressed_buckets_ = nullptr;
  prometheus::Gauge* residual_norm_ = nullptr;
  prometheus::Gauge* buckets_ = nullptr;
  prometheus::Gauge* generation_ = nullptr;
  prometheus::Gauge* replica_bytes_ = nullptr;
  prometheus::Gauge* global_batch_ = nullptr;
  prometheus::Counter* skipped_steps_ = nullptr;
  prometheus::Gauge* loss_scale_ = nullptr;
  prometheus::Gauge* grad_norm_ = nullptr;
  std::array<prometheus::Gauge*, 4> memory_{};  // params, grads, optimizer, staging
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_WORKER_METRICS_H_
