// ShardServerState: what the `ps` and `hybrid` strategies share about the
// shard servers of one generation — the connection (RemoteShards), the
// optimizer the servers run, and the servers' optimizer state as
// checkpoints see it (an OptimizerMirror, filled on rank 0 only around a
// checkpoint or a restore).
//
//   ASSIGN_OR_RETURN(auto servers, ShardServerState::Create(options, env, "ps"));
//   servers->remote().Push(...);                              // the step's traffic
//   RETURN_IF_ERROR(servers->InitServers(rank, step - 1, params));  // first step
//   RETURN_IF_ERROR(servers->FetchForCheckpoint(rank, last_step));  // SyncStateToHost
//   servers->Loaded(rank);                                    // StateLoaded
//   servers->ReleaseAfterCheckpoint();                        // next BeginStep
//
// Create checks what both strategies need (shard-server addresses, a
// generation, buffers, host memory) and fails with INVALID_ARGUMENT /
// UNIMPLEMENTED naming `--sync <name>` and what to change. Not thread-safe:
// the trainer thread calls it, as it calls the strategy; remote() follows
// RemoteShards' own rules.
#ifndef TANDEM_COMMON_SYNC_REMOTE_SHARD_SERVER_STATE_H_
#define TANDEM_COMMON_SYNC_REMOTE_SHARD_SERVER_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/shard/remote_shards.h"
#include "common/sync/registry.h"
#include "common/sync/remote/optimizer_mirror.h"
#include "common/sync/remote/server_side_checkpoint.h"
#include "proto/shardserver.pb.h"

namespace tandem {
namespace sync {

// The --sync_opt keys ps and hybrid share.
struct RemoteSyncKnobs {
  // MiB per chunk pushed / pulled, > 0. Small, so that a step is many
  // chunks in flight: a chunk is pulled while later ones are still pushed
  // (0.25 MiB: 2 ms on a 1 Gbit/s link, well above gRPC's per-message cost).
  double chunk_mb = 0.25;
  int streams = 2;             // push streams in flight per server, 1..16
  // Pull calls in flight per server, 0..32 (0 = PullLanes: as many as
  // keep `streams` default-sized chunks of pulls in flight). A pull lane
  // runs one call at a time and each call's request waits behind the
  // node's pushes on its link, so small chunks need more of them.
  int pull_streams = 0;
  absl::Duration timeout = absl::Seconds(60);  // per RPC
  // apply=chunk (default): the servers apply each chunk once it has every
  // contribution and serve its pull at once (pulls overlap pushes; a step
  // interrupted by a lost worker is left partly applied on the servers and
  // discarded by the next generation's InitShard, which starts from the
  // last committed checkpoint). apply=step: the whole step at once (a lost
  // worker leaves nothing of its step applied).
  bool apply_per_chunk = true;
  // pipeline=1 (default): each chunk's pull is issued as soon as the chunk
  // is pushed, FinishStep returns once the pushes are acknowledged, and the
  // pulled parameters land while the next forward runs: the strategy is
  // the model's parameter hook (tensor/param_hook.h) and a layer's Gather
  // waits only for the chunks under it. pipeline=0: FinishStep pulls
  // everything before it returns.
  bool pipeline = true;
  // replicate=1 (default): with >= 2 shard servers (and fp32 pulls) each
  // server's range is replicated on the next server, at most one step
  // behind, so a lost server is rebuilt from memory with <= 1 step redone
  // (issue 34; services/shardserver/replicator.h). Off the pull's path;
  // costs 4 x a range's master + optimizer state per server. 0: none, a
  // lost server means the last checkpoint.
  bool replicate = true;
};
// Pull lanes per server: `pull_streams` when given, else
// ceil(streams x 0.25 MiB / chunk_mb) within [streams, 32] (2 at the
// defaults; 8 at chunk_mb=0.0625), so the pull bytes in flight per server
// do not shrink with the chunk.
int PullLanes(const RemoteSyncKnobs& knobs);
std::vector<OptionInfo> RemoteSyncOptionInfo();
absl::StatusOr<RemoteSyncKnobs> ParseRemoteSyncKnobs(const SyncOptions& options);
absl::Status ValidateRemoteSyncOptions(const SyncOptions& options);


class ShardServerState {
 public:
  // pull_int8_chunk > 0: the servers keep int8 deltas for PullDelta
  // (hybrid's compress=int8; remote_shards.h). This rank pushes the chunks
  // c with c mod push_stride == push_offset (hybrid: its local rank of K;
  // ps: every chunk), which fixes each push lane's order (remote_shards.h).
  static absl::StatusOr<std::unique_ptr<ShardServerState>> Create(const SyncOptions& options,
                                                                  const SyncEnv& env,
                                                                  const std::string& name,
                                                                  int pull_int8_chunk = 0,
                                                                  int push_stride = 1,
                                                                  int push_offset = 0);

  shard::RemoteShards& remote() { return *remote_; }
  // --sync_opt pipeline (RemoteSyncKnobs::pipeline).
  bool pipeline() const { return pipeline_; }
  const shard::RemoteShards& remote() const { return *remote_; }
  // The servers' optimizer state for checkpoints (optimizer() of the sync).
  OptimizerMirror* mirror() { return mirror_.get(); }
  const OptimizerMirror* mirror() const { return mirror_.get(); }

  // First step of a generation, rank 0: hands every server its range of
  // `params` (last applied step `applied_step`) with the optimizer and, when
  // a restore left any, the restored optimizer state. Other ranks: nothing.
  absl::Status InitServers(int rank, int64_t applied_step, const float* params);
  // Before a checkpoint, rank 0: fetches the servers' state of `last_step`
  // into the mirror. Other ranks: nothing.
  absl::Status FetchForCheckpoint(int rank, int64_t last_step);
  // Rank 0, a new generation before InitServers: parameters (into params)
  // and optimizer state (into the mirror, sent with InitServers) of `step`
  // from the servers' memory (RemoteShards::RecoverState). Returns the
  // servers rebuilt from a replica. FAILED_PRECONDITION on other ranks.
  absl::StatusOr<std::vector<int>> RecoverFromServers(int rank, int64_t step, float* params);
  // After a restore: rank 0 keeps the restored state for the next
  // InitServers unless it is all zeros (a fresh start).
  void Loaded(int rank);
  // At the next BeginStep: the checkpoint that needed the mirror is written.
  void ReleaseAfterCheckpoint();
  // The next FetchForCheckpoint does nothing: the servers write the
  // checkpoint themselves (SaveOnServers).
  void ExpectServerSave() { skip_next_fetch_ = true; }
  // Rank 0: every server writes its range of `last_step` as
  // r.dir/ShardFileName(step, server, servers) (server_side_checkpoint.h).
  absl::StatusOr<std::vector<SavedShard>> SaveOnServers(const ServerSaveRequest& r,
                                                        int64_t last_step);
  // Rank 0: the servers copy `last_step` into their snapshots; the write
  // that follows (ServerSideCheckpoint::SnapshotOnServers).
  absl::StatusOr<ServerSideCheckpoint::ServerWrite> SnapshotOnServers(const ServerSaveRequest& r,
                                                                      int64_t last_step);

 private:
  ShardServerState(std::unique_ptr<shard::RemoteShards> remote, v1::OptimizerConfig config,
                   std::unique_ptr<OptimizerMirror> mirror, int64_t size, bool pipeline)
      : remote_(std::move(remote)),
        config_(std::move(config)),
        mirror_(std::move(mirror)),
        size_(size),
        pipeline_(pipeline) {}

  const std::unique_ptr<shard::RemoteShards> remote_;
  const v1::OptimizerConfig config_;
  const std::unique_ptr<OptimizerMirror> mirror_;
  const int64_t size_;
  const bool pipeline_;
  bool send_state_ = false;      // rank 0: the mirror holds restored state for the servers
  bool release_mirror_ = false;  // rank 0: the mirror was filled for a checkpoint
  bool skip_next_fetch_ = false;  // ExpectServerSave
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_SHARD_SERVER_STATE_H_
