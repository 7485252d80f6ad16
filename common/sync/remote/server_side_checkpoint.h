// ServerSideCheckpoint: what a strategy whose parameters and optimizer
// state live on shard servers (ps, hybrid) offers the checkpointer: the
// servers write their ranges themselves (ShardServer.SaveShard), one shard
// file each in ZeRO's manifest layout (common/checkpoint/
// sharded_checkpoint.h), instead of rank 0 fetching their state and
// writing the whole vector. The checkpointer finds it with a dynamic_cast
// of the GradientSync (a capability, not part of every strategy).
//
//   auto* s = dynamic_cast<sync::ServerSideCheckpoint*>(sync);
//   if (s != nullptr && s->CanSaveOnServers()) {
//     s->ExpectServerSave();                  // every rank, before SyncStateToHost
//     RETURN_IF_ERROR(sync->SyncStateToHost());
//     // rank 0:
//     ASSIGN_OR_RETURN(std::vector<sync::SavedShard> shards, s->SaveOnServers(request));
//     // ... then the manifest naming `shards`, then the commit.
//   }
//   // A new generation after a lost server (rank 0):
//   if (s != nullptr && s->ServersReplicate()) s->RecoverFromServers(step, params);
//
// Trainer thread only. SaveOnServers fails with the first server's error
// (naming it); nothing is committed then.
#ifndef TANDEM_COMMON_SYNC_REMOTE_SERVER_SIDE_CHECKPOINT_H_
#define TANDEM_COMMON_SYNC_REMOTE_SERVER_SIDE_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
namespace sync {

struct ServerSaveRequest {
  std::string dir;                 // checkpoint directory (the servers must reach it)
  int64_t step = 0;                // must be the last step applied
  uint64_t model_fingerprint = 0;
  // Named byte strings for the shard that starts at element 0 (the data
  // cursor, the model spec, the strategy's extra state).
  std::vector<std::pair<std::string, std::string>> blobs;
};

struct SavedShard {
  int64_t lo = 0;
  int64_t hi = 0;
  std::string file;  // base name in `dir`
};

class ServerSideCheckpoint {
 public:
  virtual ~ServerSideCheckpoint() = default;
  // The servers hold this generation's state (its first step is done).
  virtual bool CanSaveOnServers() const = 0;
  // The next SyncStateToHost skips fetching the servers' state to rank 0.
  virtual void ExpectServerSave() = 0;
  // Rank 0: every server writes its range of `step` to
  // dir/ShardFileName(step, server, servers); returns the shards in
  // ascending order, tiling [0, n).
  virtual absl::StatusOr<std::vector<SavedShard>> SaveOnServers(const ServerSaveRequest& r) = 0;

  // Range replication (issue 34 item 3; services/shardserver/replicator.h):
  // the servers keep every range's recent steps in memory, each also on
  // its neighbour, so a lost server does not send the job to the disk.
  virtual bool ServersReplicate() const = 0;

  // Background checkpoints (issue 34 item 4). Rank 0, at the step
  // boundary: every server copies its range of r.step into its snapshot
  // (memory only). Returns the write to run later on another thread — it
  // owns its connections and outlives this object — which has the servers
  // write those copies to dir/ShardFileName(step, server, servers) and
  // returns the shards as SaveOnServers does.
  using ServerWrite = std::function<absl::StatusOr<std::vector<SavedShard>>()>;
  virtual absl::StatusOr<ServerWrite> SnapshotOnServers(const ServerSaveRequest& r) = 0;
  // Rank 0, at a new generation before its first step: the parameters of
  // `step` (into params, the flat vector) and the optimizer state from the
  // servers' memory; the state goes back to the servers with the
  // generation's InitShard (after StateLoaded). Returns the servers whose
  // range came from its replica; the error says which range is not held at
  // `step` (the caller tries another step or the disk).
  virtual absl::StatusOr<std::vector<int>> RecoverFromServers(int64_t step, float* params) = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_SERVER_SIDE_CHECKPOINT_H_
