// ShardCommits: the coordinator's half of a sharded checkpoint written in
// the background (zero1/2/3 with --background_checkpoint): each writing
// rank reports its own shard once the file is on disk, and the checkpoint
// counts only when every shard of that step has been reported.
//
//   ShardCommits pending;
//   ASSIGN_OR_RETURN(std::optional<v1::CheckpointRecord> done,
//                    pending.Add(generation, record, shard, shards));
//   if (done.has_value()) ...record *done as the last checkpoint...
//
// Reports are keyed by step within one generation: a report of another
// generation, or of a step at or below the committed one, clears what can
// no longer complete (Prune). At most kMaxPending steps wait at once (one
// snapshot at a time per rank means two in practice: a step whose shard
// failed on some rank, and the next); the oldest is dropped beyond that and
// logged. Reports are idempotent (a retried RPC counts once). Not
// persisted: a coordinator restart forgets partial checkpoints, which then
// never count. Thread-compatible (CoordinatorCore calls it under its lock).
#ifndef TANDEM_SERVICES_COORDINATOR_SHARD_COMMITS_H_
#define TANDEM_SERVICES_COORDINATOR_SHARD_COMMITS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"

namespace tandem {

class ShardCommits {
 public:
  static constexpr int kMaxPending = 4;
  static constexpr int kMaxShards = 1 << 16;

  // Adds `shard` of `shards` for `record`'s step in `generation`; returns
  // the record to commit when this report completes the step (the record
  // of the first report, stamped with this one's unix_millis), nullopt
  // while shards are missing. INVALID_ARGUMENT for a shard outside
  // [0, shards) or shards outside [1, kMaxShards]; FAILED_PRECONDITION when
  // the step's earlier reports named another path or shard count.
  absl::StatusOr<std::optional<v1::CheckpointRecord>> Add(int64_t generation,
                                                          const v1::CheckpointRecord& record,
                                                          int shard, int shards);
  // Drops steps of other generations and steps below `committed_step`.
  void Prune(int64_t generation, int64_t committed_step);
  // Steps with some but not all shards reported.
  int pending() const { return static_cast<int>(by_step_.size()); }

 private:
  struct Pending {
    int64_t generation = 0;
    int shards = 0;
    v1::CheckpointRecord record;
    std::set<int> reported;
  };
  std::map<int64_t, Pending> by_step_;
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_SHARD_COMMITS_H_
