// The shard server's Prometheus metrics, created once per process and
// shared by the store and the service:
//
//   tandem_shard_push_bytes_total, tandem_shard_pull_bytes_total (payload),
//   tandem_shard_push_seconds, tandem_shard_pull_seconds (per RPC, histograms),
//   tandem_shard_steps_applied_total, tandem_shard_optimizer_seconds_total,
//   tandem_shard_chunks_waiting (chunks holding part of a step's
//   contributions), tandem_shard_duplicate_pushes_total,
//   tandem_shard_refused_pushes_total, tandem_replica_bytes (memory held
//   for range replication: the neighbour's range kept at its two newest
//   steps plus this range's copies from before its last two steps),
//   tandem_shard_replica_wait_seconds_total (time a step's apply waited
//   for the replica to acknowledge the step before).
//
// Thread-safe (prometheus handles are atomic). The handles belong to the
// Metrics object, which must outlive this struct. Create fails like
// Metrics::Counter (INVALID_ARGUMENT on a name clash).
#ifndef TANDEM_SERVICES_SHARDSERVER_SHARD_METRICS_H_
#define TANDEM_SERVICES_SHARDSERVER_SHARD_METRICS_H_

#include "absl/status/statusor.h"
#include "common/metrics/metrics.h"

namespace tandem {
namespace shardserver {

struct ShardMetrics {
  prometheus::Counter* push_bytes = nullptr;
  prometheus::Counter* pull_bytes = nullptr;
  prometheus::Histogram* push_seconds = nullptr;
  prometheus::Histogram* pull_seconds = nullptr;
  prometheus::Counter* steps_applied = nullptr;
  prometheus::Counter* optimizer_seconds = nullptr;
  prometheus::Gauge* chunks_waiting = nullptr;
  prometheus::Counter* duplicate_pushes = nullptr;
  prometheus::Counter* refused_pushes = nullptr;
  prometheus::Gauge* replica_bytes = nullptr;
  prometheus::Counter* replica_wait_seconds = nullptr;

  static absl::StatusOr<ShardMetrics> Create(Metrics* metrics);
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_SHARD_METRICS_H_
