#include "services/shardserver/shard_metrics.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace shardserver {

absl::StatusOr<ShardMetrics> ShardMetrics::Create(Metrics* m) {
  ShardMetrics s;
  ASSIGN_OR_RETURN(s.push_bytes, m->Counter("tandem_shard_push_bytes_total",
                                            "Gradient payload bytes received in pushes."));
  ASSIGN_OR_RETURN(s.pull_bytes, m->Counter("tandem_shard_pull_bytes_total",
                                            "Parameter payload bytes sent in pulls."));
  ASSIGN_OR_RETURN(s.push_seconds, m->Histogram("tandem_shard_push_seconds",
                                                "Duration of PushGradients streams.",
                                                Metrics::LatencyBuckets()));
  ASSIGN_OR_RETURN(s.pull_seconds,
                   m->Histogram("tandem_shard_pull_seconds",
                                "Duration of PullParameters calls, waiting included.",
                                Metrics::LatencyBuckets()));
  ASSIGN_OR_RETURN(s.steps_applied, m->Counter("tandem_shard_steps_applied_total",
                                               "Optimizer steps applied to this range."));
  ASSIGN_OR_RETURN(s.optimizer_seconds, m->Counter("tandem_shard_optimizer_seconds_total",
                                                   "Seconds spent applying the optimizer."));
  ASSIGN_OR_RETURN(s.chunks_waiting,
                   m->Gauge("tandem_shard_chunks_waiting",
                            "Chunks holding some but not all contributions of a step."));
  ASSIGN_OR_RETURN(s.duplicate_pushes,
                   m->Counter("tandem_shard_duplicate_pushes_total",
                              "Repeated pushes acknowledged without summing."));
  ASSIGN_OR_RETURN(s.refused_pushes,
                   m->Counter("tandem_shard_refused_pushes_total",
                              "Pushes refused (wrong generation, step, range, size)."));
  ASSIGN_OR_RETURN(s.replica_bytes,
                   m->Gauge("tandem_replica_bytes",
                            "Bytes held for range replication: the replica of the neighbouring "
                            "server's range (two steps) and this range's copies from before "
                            "its last two steps."));
  ASSIGN_OR_RETURN(s.replica_wait_seconds,
                   m->Counter("tandem_shard_replica_wait_seconds_total",
                              "Seconds steps waited before applying for the replica to "
                              "acknowledge the step before (replication lags one step at most)."));
  return s;
}

}  // namespace shardserver
}  // namespace tandem
