// HybridSyncImpl, the `hybrid` strategy's GradientSync, declared for the
// files that define its parts (private to :hybrid_sync; others use
// CreateHybridSync in hybrid_sync.h):
//   hybrid_sync.cc   options, creation, the step (BeginStep .. FinishStep)
//   hybrid_comm.cc   the communication thread: per group the node
//                    reduce-scatter and the push; per group, once its pull
//                    is in, the node allgather (the landing)
//   hybrid_land.cc   the parameter hook: a layer waits for its groups' landing
//   hybrid_state.cc  checkpoint state: servers' optimizer state, int8
//                    residuals through rank 0, resync to the fp32 master
// With --sync_opt ring_share > 0 the strategy's vector (params_, grads_,
// size_, the servers' layout) is the part after the ring's prefix
// [0, ring_offset_) of the model's; the prefix is ring_ (hybrid_ring.h).
// Ranges from backward and the parameter hook are the model's (absolute).
// Thread-safety as in hybrid_sync.h.
#ifndef TANDEM_COMMON_SYNC_REMOTE_HYBRID_SYNC_INTERNAL_H_
#define TANDEM_COMMON_SYNC_REMOTE_HYBRID_SYNC_INTERNAL_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/codec/error_feedback.h"
#include "common/codec/int8_codec.h"
#include "common/log/log.h"
#include "common/shard/remote_shards.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/node_shares.h"
#include "common/sync/bucket/bucket_readiness.h"
#include "common/sync/bucket/comm_executor.h"
#include "common/sync/remote/hybrid_ring.h"
#include "common/sync/remote/hybrid_sync.h"
#include "common/sync/rank0_state.h"
#include "common/sync/remote/remote_step.h"
#include "common/sync/remote/shard_server_state.h"
#include "common/tensor/param_hook.h"
#include "common/timing/seconds_since.h"
#include "common/trace/trace.h"

namespace tandem {
namespace sync {
namespace hybrid_internal {

using codec::Codec;
using codec::EncodeParams;
using codec::ErrorFeedback;
using codec::MakeInt8Codec;

constexpr char kLabel[] = "hybrid sync";
constexpr char kMetaName[] = "hybrid/meta";
constexpr char kResidualsName[] = "hybrid/residuals";
// "TDMH" + layout version: tells saved residuals from zeros.
constexpr int64_t kMagic = 0x54444d48'00000001;
// Meta fields (int64, stored in a float buffer bit for bit).
enum Meta { kMagicField, kWorld, kSize, kInt8ChunkField, kMetaFields };
// Residuals move to and from rank 0 in pieces of this many floats per rank.
constexpr int64_t kStatePiece = kRank0StatePiece;

// Group g of the layout: chunks [first, end), the largest `block` floats.
struct Group {
  int first = 0;
  int end = 0;
  int64_t block = 0;
  int64_t lo = 0, hi = 0;  // elements covered
  // Local rank k's piece: chunk first + k, or none past the end.
  std::vector<NodeShares::Piece> pieces;
};

// What the communication thread runs, in the order queued: a group's node
// reduce-scatter and push (during backward), or its landing (queued by
// FinishStep): this rank's pull of it, then the node allgather.
struct CommOp {
  enum Kind { kReduce, kLand, kRing } kind = kReduce;
  int group = 0;
  int64_t step = 0;  // kLand: the step pulled
};

class HybridSyncImpl final : public GradientSync,
                             public ServerSideCheckpoint,
                             public tensor::ParamHook {
 public:
  // env: the servers' part of the vector (after ring's prefix, if any).
  HybridSyncImpl(SyncEnv env, std::unique_ptr<ShardServerState> servers, int int8_chunk,
                 std::unique_ptr<HybridRing> ring = nullptr)
      : int8_chunk_(int8_chunk),
        codec_(int8_chunk > 0 ? MakeInt8Codec({.chunk = int8_chunk}) : nullptr),
        generation_(env.shard_servers.generation),
        world_(env.comms->world.get()),
        intra_(env.comms->intra.get()),
        local_rank_(env.comms->intra->rank()),
        local_size_(env.comms->intra->world_size()),
        params_(env.params),
        grads_(env.grads),
        size_(env.size),
        servers_(std::move(servers)),
        remote_(&servers_->remote()),
        pipeline_(servers_->pipeline()),
        ring_(std::move(ring)),
        ring_offset_(ring_ != nullptr ? ring_->size() : 0),
        groups_(MakeGroups(remote_->layout(), local_size_)),
        ready_(BucketReadiness::ForUnitsInOrder(Units(groups_, ring_offset_))),
        step_(RemoteStepOptions{"hybrid sync", generation_, world_, servers_.get(), params_,
                                std::move(env.shard_servers.learning_rate), local_size_,
                                int8_chunk_}) {
    int64_t max_block = 0, slice = 0;
    for (const Group& g : groups_) {
      max_block = std::max(max_block, g.block);
      const int mine = g.first + local_rank_;
      slice_offset_.push_back(slice);
      if (mine < g.end) slice += remote_->layout().chunk(mine).size();
    }
    shares_ = std::make_unique<NodeShares>(intra_, max_block);
    // One rank per node pushes straight from the gradient buffer (PushMine).
    if (local_size_ > 1) slice_.assign(slice, 0.f);
    if (codec_ != nullptr) {
      int64_t bytes = 0;
      for (const Group& g : groups_) {
        encoded_offset_.push_back(bytes);
        const int mine = g.first + local_rank_;
        if (mine < g.end) bytes += codec_->MaxEncodedBytes(remote_->layout().chunk(mine).size());
      }
      encoded_.assign(bytes, 0);
      pulled_.assign(bytes, 0);
      feedback_ = std::make_unique<ErrorFeedback>(codec_.get(), size_);
    }
    land_ticket_.assign(groups_.size(), -1);
    // A step queues each group at most twice (reduce, then land) and the
    // ring part once.
    executor_ = std::make_unique<CommExecutor<CommOp>>(
        std::max<int64_t>(1, 2 * groups_.size() + (ring_ != nullptr ? 1 : 0)),
        [this](const CommOp& op) { return Run(op); });
  }

  // executor_, the last member, stops the communication thread first.
  ~HybridSyncImpl() override = default;

  static std::vector<Group> MakeGroups(const shard::ShardLayout& l, int k) {
    std::vector<Group> out;
    for (int first = 0; first < l.num_chunks(); first += k) {
      Group g;
      g.first = first;
      g.end = std::min(first + k, l.num_chunks());
      for (int c = g.first; c < g.end; ++c) g.block = std::max(g.block, l.chunk(c).size());
      for (int j = 0; j < k; ++j) {
        if (g.first + j >= g.end) {
          g.pieces.push_back({0, 0});
        } else {
          g.pieces.push_back({l.chunk(g.first + j).lo, l.chunk(g.first + j).size()});
        }
      }
      g.lo = l.chunk(g.first).lo;
      g.hi = l.chunk(g.end - 1).hi;
      out.push_back(g);
    }
    return out;
  }
  // The groups in issue order, in the model's offsets: last group first
  // (backward produces the end of the vector first, and every rank of the
  // node issues the same order), then the ring's prefix [0, ring), if any.
  static std::vector<std::pair<int64_t, int64_t>> Units(const std::vector<Group>& groups,
                                                        int64_t ring) {
    std::vector<std::pair<int64_t, int64_t>> u;
    for (auto g = groups.rbegin(); g != groups.rend(); ++g) {
      u.push_back({ring + g->lo, ring + g->hi});
    }
    if (ring > 0) u.push_back({0, ring});
    return u;
  }

  std::string name() const override { return "hybrid"; }
  // Every rank holds the whole (pulled) vector: the checkpointer writes it
  // once, from rank 0.
  optim::ParamRange owned_range() const override { return {0, ring_offset_ + size_}; }
  // The servers' optimizer state, visible to checkpoints (optimizer_mirror.h);
  // with a ring part, the ring's state in front of it (hybrid_ring.h).
  optim::Optimizer* optimizer() override {
    return ring_ != nullptr ? ring_->whole() : servers_->mirror();
  }

  // pipeline=1: the model asks for each layer through this hook, and the
  // groups land (pull, node allgather) while the next forward runs.
  tensor::ParamHook* param_hook() override { return pipeline_ ? this : nullptr; }

  // ParamHook (trainer thread): params[lo, hi) holds the step's result
  // once every group meeting it has landed; later groups may be in flight.
  absl::Status Gather(int64_t lo, int64_t hi, tensor::ParamPass) override;
  void Release(int64_t, int64_t, tensor::ParamPass) override {}

  // Before a checkpoint: rank 0 (the one that writes the whole vector)
  // fetches the servers' state of the last applied step.
  absl::Status SyncStateToHost() override;

  // Checkpoints written by the servers (server_side_checkpoint.h).
  // With a ring part the servers hold only the rest of the state: the
  // workers write checkpoints, and a lost server means the last one.
  bool CanSaveOnServers() const override {
    return ring_ == nullptr && step_.initialised() && step_.ok();
  }
  void ExpectServerSave() override { servers_->ExpectServerSave(); }
  absl::StatusOr<std::vector<SavedShard>> SaveOnServers(const ServerSaveRequest& r) override;
  absl::StatusOr<ServerWrite> SnapshotOnServers(const ServerSaveRequest& r) override;
  bool ServersReplicate() const override {
    return ring_ == nullptr && servers_->remote().replicated();
  }
  absl::StatusOr<std::vector<int>> RecoverFromServers(int64_t step, float* params) override {
    if (ring_ != nullptr) {
      return absl::FailedPreconditionError(
          "hybrid sync: with ring_share > 0 the ring part's state is not on the servers");
    }
    return servers_->RecoverFromServers(world_->rank(), step, params);
  }

  // After a restore: the parameters (and maybe state) changed, so the
  // servers are initialised again at the next step.
  absl::Status StateLoaded() override;

  // compress=int8 only: the error-feedback residuals (see hybrid_sync.h).
  std::vector<optim::StateBuffer> extra_state() override;

  SyncMemory memory() const override {
    SyncMemory m;
    m.param_bytes = (ring_offset_ + size_) * int64_t{sizeof(float)};
    m.grad_bytes = static_cast<int64_t>(slice_.size()) * int64_t{sizeof(float)};
    // The servers' only around checkpoints; the ring part's always.
    m.optimizer_bytes = servers_->mirror()->held_bytes() +
                        (ring_ != nullptr ? ring_->optimizer_bytes() : 0);
    if (ring_ != nullptr) m.staging_bytes += ring_->staging_bytes();
    m.staging_bytes += static_cast<int64_t>(gathered_.size() + piece_.size() +
                                           (feedback_ != nullptr ? size_ : 0)) *
                          int64_t{sizeof(float)} +
                      shares_->staging_bytes() +
                      static_cast<int64_t>(encoded_.size() + pulled_.size());
    return m;
  }

  absl::Status BeginStep(const StepOptions& options) override;

  void OnGradientsReady(int64_t lo, int64_t hi) override;

  absl::Status FinishStep(const optim::StepContext& ctx) override;

  SyncStats stats() const override {
    const shard::RemoteStats r = remote_->stats();
    SyncStats s;
    absl::MutexLock lock(&mu_);
    s.steps = steps_;
    s.buckets = collectives_;
    s.bytes_sent = r.pushed_bytes + intra_bytes_;
    s.inter_node_bytes = r.pushed_bytes + r.pulled_bytes + ring_bytes_;
    s.comm_seconds = comm_seconds_ + wait_seconds_;
    s.exposed_wait_seconds = wait_seconds_;
    s.compress_bytes_before = compress_before_;
    s.compress_bytes_after = compress_after_;
    s.residual_norm = residual_norm_;
    return s;
  }

 private:
  // Pushes this rank's chunk of group g for `step`; with compress=int8
  // encoded first (its residual added and updated); pipeline=1: its pull
  // right behind it. One thread at a time (the communication thread, or
  // the trainer thread when pushes wait for FinishStep); the encoded block
  // stays unchanged until WaitPushes.
  void PushMine(int g, int64_t step);
  // This rank's chunk of group g as of `step` (fp32, or the int8 delta
  // into pulled_), on the pull lanes; GatherGroup waits for it.
  void PullMine(int g, int64_t step);

  void AllocateGathered() {
    if (world_->rank() == 0 && gathered_.empty()) {
      gathered_.assign(static_cast<size_t>(world_->world_size()) * size_, 0.f);
    }
    if (piece_.empty()) {
      piece_.assign(static_cast<size_t>(world_->world_size()) * std::min(size_, kStatePiece), 0.f);
    }
  }
  void PutMeta(Meta field, int64_t v) { std::memcpy(&meta_[2 * field], &v, sizeof(v)); }
  int64_t GetMeta(Meta field) const {
    int64_t v;
    std::memcpy(&v, &meta_[2 * field], sizeof(v));
    return v;
  }

  // compress=int8, before a checkpoint: every rank pulls its chunks' fp32
  // master weights, resetting the servers' delta reference to them, and
  // the node allgathers them, so every rank holds the master exactly (what
  // the checkpoint saves, and what a resume from it starts from: the
  // continuation is the same either way).
  absl::Status ResyncToMaster();

  // Every rank's residuals onto rank 0 (collective over the world group).
  absl::Status GatherResiduals();

  // Rank 0 holds what the checkpoint had: it checks that it fits and sends
  // each rank its own residuals (collective over the world group).
  absl::Status ScatterResiduals();

  // Communication thread: reduce-scatter group g inside the node; this
  // rank's chunk of the node sum lands in slice_.
  absl::Status ReduceGroup(int g);

  // Trainer thread: this rank's pulled chunk of group g -> the node. delta:
  // the pull was the chunk's int8 delta block, added to the parameters here.
  absl::Status GatherGroup(int g, int64_t step, bool delta);

  // Communication thread: group g's node reduce-scatter and, when pushes
  // overlap backward, its push; skipped once the step is abandoned.
  absl::Status RunGroup(int g);

  // Communication thread: the ring part's allreduce (ring_); skipped once
  // the step is abandoned.
  absl::Status RunRing();

  // Communication thread: one queued operation.
  absl::Status Run(const CommOp& op);

  // Trainer thread (FinishStep): queues every group's landing, first group
  // first: the order the next forward needs them and, as the push lanes
  // send the lowest queued chunk first (lane_queue.h), about the order the
  // pulls come back in.
  void QueueLandings(int64_t step);

  // Trainer thread: the last step's landings are all done (or failed) and
  // no pull is in flight. Every call but the hook's starts here, so the
  // communication thread is idle when the trainer touches shares_ or
  // params_ as a whole.
  absl::Status WaitLanded();

  absl::Status Fail(absl::Status s) { return step_.Fail(std::move(s)); }

  const int int8_chunk_;                 // 0: fp32 pushes
  const std::unique_ptr<Codec> codec_;   // compress=int8, else null
  const int64_t generation_;
  Communicator* const world_;
  Communicator* const intra_;
  const int local_rank_;
  const int local_size_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const std::unique_ptr<ShardServerState> servers_;
  shard::RemoteShards* const remote_;  // servers_'s connection
  const bool pipeline_;                // --sync_opt pipeline: pulls right behind pushes
  // --sync_opt ring_share > 0: the model's prefix [0, ring_offset_) by a
  // cross-node ring (null, 0: everything through the servers).
  const std::unique_ptr<HybridRing> ring_;
  const int64_t ring_offset_;
  const std::vector<Group> groups_;
  BucketReadiness ready_;  // backward thread during a step
  RemoteStep step_;       // trainer thread: protocol, server init, step count, header

  // Sized once.
  std::vector<int64_t> slice_offset_;  // per group: where this rank's chunk sits in slice_
  std::vector<float> slice_;           // this rank's chunks, node-reduced (empty when K = 1)
  // The intra-node reduce-scatter of a group's chunks and the allgather
  // back (communication thread, then the trainer thread after Drain).
  std::unique_ptr<NodeShares> shares_;
  // compress=int8: residuals by flat offset, this step's encoded blocks.
  std::unique_ptr<ErrorFeedback> feedback_;
  std::vector<int64_t> encoded_offset_;  // per group
  std::vector<uint8_t> encoded_;
  std::vector<uint8_t> pulled_;  // this step's pulled delta blocks, same layout
  // Checkpoint state (trainer thread, between steps).
  std::vector<float> meta_ = std::vector<float>(2 * kMetaFields, 0.f);
  std::vector<float> gathered_;  // rank 0, around a checkpoint: world * size_
  std::vector<float> piece_;     // world * kStatePiece (or less)
  // Trainer thread: the landings FinishStep queued and not yet waited for
  // by WaitLanded; each group's executor ticket.
  bool landing_ = false;
  std::vector<int64_t> land_ticket_;


  mutable absl::Mutex mu_;
  bool step_open_ ABSL_GUARDED_BY(mu_) = false;
  bool push_now_ ABSL_GUARDED_BY(mu_) = false;
  int64_t push_step_ ABSL_GUARDED_BY(mu_) = 0;  // the step pushes carry (push_now_)
  absl::Status comm_error_ ABSL_GUARDED_BY(mu_);
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t collectives_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t intra_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t ring_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // ring_'s inter-node bytes
  double comm_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compress_before_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compress_after_ ABSL_GUARDED_BY(mu_) = 0;
  double residual_norm_ ABSL_GUARDED_BY(mu_) = 0;
  // Last: its thread runs Run over the members above, in queue order.
  std::unique_ptr<CommExecutor<CommOp>> executor_;
};

}  // namespace hybrid_internal
}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_HYBRID_SYNC_INTERNAL_H_
