// ReplicaExtraFloats: what a shard server holds beyond its own range when
// its ranges are replicated (--sync_opt replicate=1, the default with >= 2
// servers; services/shardserver/replicator.h): the neighbour's range at its
// two newest steps, this range's copies from before its last two steps
// (kReplicaStateCopies ranges of master weights + optimizer state) and its
// last summed gradient, what the replica is sent (one range of fp32).
// One rule for the job's start line (common/sync/remote/shard_server_state)
// and `tandem plan`'s recovery line (common/plan/recovery_memory).
// Pure; thread-safe.
#ifndef TANDEM_COMMON_SHARD_REPLICA_MEMORY_H_
#define TANDEM_COMMON_SHARD_REPLICA_MEMORY_H_

#include <cstdint>

namespace tandem {
namespace shard {

inline constexpr int kReplicaStateCopies = 4;

// Floats held for replication by a server whose widest range has `range`
// elements and whose optimizer keeps `state_buffers` floats per element.
constexpr int64_t ReplicaExtraFloats(int64_t range, int64_t state_buffers) {
  return kReplicaStateCopies * (1 + state_buffers) * range + range;
}

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_REPLICA_MEMORY_H_
