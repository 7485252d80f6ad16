#include "services/coordinator/shard_commits.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"

namespace tandem {

absl::StatusOr<std::optional<v1::CheckpointRecord>> ShardCommits::Add(
    int64_t generation, const v1::CheckpointRecord& record, int shard, int shards) {
  if (shards < 1 || shards > kMaxShards || shard < 0 || shard >= shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CommitCheckpoint: shard ", shard, " of ", shards, " for step ", record.step(),
        " is out of range (shard must be in [0, shards), shards in [1, ", kMaxShards, "])"));
  }
  auto [it, fresh] = by_step_.try_emplace(record.step());
  Pending& p = it->second;
  if (fresh) {
    p.generation = generation;
    p.shards = shards;
    p.record = record;
  } else if (p.generation != generation || p.shards != shards ||
             p.record.path() != record.path()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CommitCheckpoint: shard ", shard, " of ", shards, " of step ", record.step(), " ('",
        record.path(), "', generation ", generation, ") disagrees with the step's earlier "
        "reports (", p.shards, " shards of '", p.record.path(), "', generation ", p.generation,
        ")"));
  }
  p.reported.insert(shard);
  if (static_cast<int>(p.reported.size()) < p.shards) {
    while (pending() > kMaxPending) {
      const Pending& old = by_step_.begin()->second;
      LOG(WARNING) << "checkpoint at step " << by_step_.begin()->first << " ('"
                   << old.record.path() << "') is not committed: only " << old.reported.size()
                   << " of its " << old.shards << " shards were reported";
      by_step_.erase(by_step_.begin());
    }
    return std::optional<v1::CheckpointRecord>();
  }
  v1::CheckpointRecord done = std::move(p.record);
  done.set_unix_millis(record.unix_millis());
  // Older steps can no longer count: this one supersedes them.
  by_step_.erase(by_step_.begin(), std::next(it));
  return std::optional<v1::CheckpointRecord>(std::move(done));
}

void ShardCommits::Prune(int64_t generation, int64_t committed_step) {
  for (auto it = by_step_.begin(); it != by_step_.end();) {
    if (it->second.generation != generation || it->first < committed_step) {
      it = by_step_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace tandem
