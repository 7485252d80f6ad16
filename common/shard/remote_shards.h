// RemoteShards: a worker's side of the shard servers for one generation:
// one ShardClient per server and, per server, `streams_per_server` push
// lanes (each a thread with its own push stream) and
// `pull_streams_per_server` pull lanes (default: as many), so several
// pushes and pulls are in flight to every server at once and a pull
// never queues behind a push. Chunk c (ShardLayout) of server s always goes
// through push lane (s, (c - first) mod streams_per_server) and pull lane
// (s, ((c - first) / push_stride) mod pull lanes), first being s's
// first chunk. A push lane sends this rank's chunks in ascending order, the
// same every step, and a chunk's pull goes to its lane once its push is
// written (lane_queue.h), so the first layers come back first and all
// ranks' pushes of a chunk reach its server together.
//
//   ASSIGN_OR_RETURN(auto r, RemoteShards::Create(options));
//   if (rank == 0) RETURN_IF_ERROR(r->InitServers(step, optimizer, params));
//   RETURN_IF_ERROR(r->BeginPushes(header));       // per step
//   r->Push(c, grads + r->layout().chunk(c).lo);   // as chunks become final
//   r->ClosePushes();                              // streams end after their chunks
//   r->Pull(c, step, params);  ...                 // on the pull lanes; the server
//                                                  // answers once the step is applied
//   RETURN_IF_ERROR(r->WaitPushes());              // every push acknowledged
//   RETURN_IF_ERROR(r->WaitPulled(c));
//
// Pushed data must stay unchanged until WaitPushes returns (a stream that
// breaks with UNAVAILABLE is reopened and its chunks of the step sent again:
// the server acknowledges repeats without summing them). Nothing is
// allocated per step beyond what gRPC allocates.
//
// Thread-safety: BeginPushes / ClosePushes / WaitPushes / WaitPulled /
// WaitAllPulls and InitServers from one thread; Push and Pull from one
// thread at a time (the backward or communication thread), between
// BeginPushes and ClosePushes for pushes. Failure: the first error of any
// lane (the server's refusal, DEADLINE_EXCEEDED after the timeout) is
// returned by WaitPushes / WaitPulled / WaitAllPulls, naming the server;
// later work is skipped (the object is then done: destroy it). The
// destructor cancels pulls still waiting on their servers and open streams,
// and joins the lanes.
#ifndef TANDEM_COMMON_SHARD_REMOTE_SHARDS_H_
#define TANDEM_COMMON_SHARD_REMOTE_SHARDS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/shard/lane_queue.h"
#include "common/shard/shard_client.h"
#include "common/shard/shard_layout.h"

namespace tandem {
namespace shard {

struct RemoteShardsOptions {
  std::vector<std::string> addresses;  // one per server, host:port
  std::string job_id;
  int64_t generation = 0;
  int rank = 0;
  int world_size = 1;
  int64_t size = 0;                    // flat vector, floats
  int64_t chunk_elements = 1 << 20;    // 4 MiB chunks
  int streams_per_server = 2;          // push lanes per server, >= 1
  // Pull lanes per server (each one pull call at a time), >= 1; 0 = as many
  // as push lanes. A pull's round trip (its request queued behind this
  // node's pushes on the link, then the answer) is latency, so with small
  // chunks more pull lanes keep the servers' outgoing links busy.
  int pull_streams_per_server = 0;
  absl::Duration timeout = absl::Seconds(60);
  int push_attempts = 3;               // per stream, UNAVAILABLE only
  bool apply_per_chunk = false;        // InitShard's mode (range_store.h)
  int pull_int8_chunk = 0;             // > 0: servers keep int8 deltas (PullDelta)
  // Range replication (services/shardserver/replicator.h): with >= 2
  // servers and fp32 pulls, InitServers names server (s + 1) mod S as the
  // replica of server s's range; RecoverState reads the ranges back. Off
  // here; ps and hybrid turn it on by default (--sync_opt replicate).
  bool replicate = false;
  // This rank pushes the chunks c with c mod push_stride == push_offset
  // (ps: all; hybrid: local rank l of K pushes l, l + K, ...): each push
  // lane sends its share of them in ascending order, every step the same
  // (see lane_queue.h), so all ranks put a chunk on the wire together and
  // the first layers come back first.
  int push_stride = 1;
  int push_offset = 0;
};

struct RemoteStats {
  int64_t pushed_bytes = 0;
  int64_t pulled_bytes = 0;
  int64_t duplicates = 0;  // pushes the servers acknowledged as repeats
};

class RemoteShards {
 public:
  static absl::StatusOr<std::unique_ptr<RemoteShards>> Create(const RemoteShardsOptions& options);
  ~RemoteShards();
  RemoteShards(const RemoteShards&) = delete;
  RemoteShards& operator=(const RemoteShards&) = delete;

  const ShardLayout& layout() const { return layout_; }

  // Rank 0, once per generation: every server gets its range of `params`
  // (the flat vector's base), the chunk layout, the world size and the
  // optimizer; `step` is the last applied step. In parallel over servers.
  absl::Status InitServers(int64_t step, const v1::OptimizerConfig& optimizer,
                           const float* params,
                           const std::vector<std::pair<std::string, const float*>>& state = {});
  // Optimizer state buffer `name` as of `step` from every server into
  // out[0, size) (in parallel over servers; for checkpoints).
  absl::Status PullState(int64_t step, const std::string& name, float* out);
  // Every server that owns elements writes its range of `step` to
  // paths[server] (ShardServer.SaveShard), in parallel; `blobs` go to the
  // server whose range starts at 0. Returns each server's range (empty for
  // one that owns nothing and so wrote nothing).
  // mode SAVE_SNAPSHOT: the servers only copy `step` into their snapshot
  // (paths unused); SAVE_FROM_SNAPSHOT writes that copy (see
  // shardserver.proto).
  absl::StatusOr<std::vector<optim::ParamRange>> SaveShards(
      int64_t step, uint64_t model_fingerprint, const std::vector<std::string>& paths,
      const std::vector<std::pair<std::string, std::string>>& blobs,
      v1::SaveMode mode = v1::SAVE_NOW);
  // A background checkpoint's second half, safe to run on another thread
  // after this object is gone: SaveShards(..., SAVE_FROM_SNAPSHOT) over
  // connections of its own.
  using SnapshotWrite = std::function<absl::StatusOr<std::vector<optim::ParamRange>>(
      int64_t step, uint64_t model_fingerprint, const std::vector<std::string>& paths,
      const std::vector<std::pair<std::string, std::string>>& blobs)>;
  SnapshotWrite SnapshotWriter() const;

  // Whether InitServers asks the servers to replicate their ranges.
  bool replicated() const;
  // After a shard server was lost (a new generation, rank 0, before
  // InitServers): the parameters and each optimizer state buffer of
  // `step`, rebuilt from the servers' memory — each range from its own
  // server's kept versions, else from the replica its neighbour holds —
  // into params and the named flat buffers (bases, `size` floats each), in
  // parallel over ranges. Returns the servers whose range came from a
  // replica; the first range neither holds is the error (the caller falls
  // back to the disk checkpoint).
  absl::StatusOr<std::vector<int>> RecoverState(
      int64_t step, float* params, const std::vector<std::pair<std::string, float*>>& state);

  absl::Status BeginPushes(const PushHeader& header);
  // `data`: chunk's c.size() floats, or its int8 block when the step's
  // header has int8_chunk > 0 (shard_client.h).
  void Push(int chunk, const void* data);
  void ClosePushes();
  absl::Status WaitPushes();

  // reset_delta_reference: see ShardClient::Pull.
  void Pull(int chunk, int64_t step, float* params, bool reset_delta_reference = false);
  // Chunk c's int8 delta block for `step` (Int8BlockBytes(c.size(),
  // pull_int8_chunk) bytes) into block; waited for like a pull.
  void PullDelta(int chunk, int64_t step, uint8_t* block);
  absl::Status WaitPulled(int chunk);
  absl::Status WaitAllPulls();

  RemoteStats stats() const;

 private:
  struct Lane;
  explicit RemoteShards(const RemoteShardsOptions& options, ShardLayout layout);
  Lane& LaneOf(int chunk, bool pull = false);
  int pull_lanes_per_server() const {
    return options_.pull_streams_per_server > 0 ? options_.pull_streams_per_server
                                                : options_.streams_per_server;
  }
  // The chunks this rank pushes through push lane k of `server`, ascending.
  std::vector<int> PushOrder(int server, int k) const;
  // A lane's thread: its jobs in order until stopped. A push job is
  // dropped once any lane has failed; closes and pulls still count down.
  void RunLane(Lane* lane);
  // `data`: each chunk's push data this step, resent when a stream reopens.
  void RunPush(Lane* lane, const LaneJob& job, std::vector<const void*>& data);
  void RunClose(Lane* lane, bool failed, const std::vector<const void*>& data);
  void RunPull(Lane* lane, const LaneJob& job, bool failed);
  // After chunk's push was written or dropped: its held pull to its lane.
  void ReleasePull(int chunk);
  absl::Status ReopenStream(Lane* lane, const std::vector<const void*>& data);
  // A pull job: into params (fp32) or block (an int8 delta).
  void EnqueuePull(int chunk, int64_t step, float* params, uint8_t* block, bool reset);
  absl::Status FirstError() const;

  const RemoteShardsOptions options_;
  const ShardLayout layout_;
  std::vector<std::unique_ptr<ShardClient>> clients_;
  std::vector<std::unique_ptr<Lane>> lanes_;       // push lanes
  std::vector<std::unique_ptr<Lane>> pull_lanes_;  // pulls only, pull_lanes_per_server() each
  PushHeader header_;  // set in BeginPushes, read by lanes while a step is open

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<char> pulled_ ABSL_GUARDED_BY(mu_);  // per chunk
  PullGate gate_ ABSL_GUARDED_BY(mu_);            // pulls behind their pushes
  int pulls_pending_ ABSL_GUARDED_BY(mu_) = 0;
  int closes_pending_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  RemoteStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_REMOTE_SHARDS_H_
