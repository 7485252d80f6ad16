#include "common/sync/remote/hybrid_sync.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
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
#include "common/sync/bucket/bucket_readiness.h"
#include "common/sync/remote/shard_server_state.h"
#include "common/sync/rank0_state.h"
#include "common/sync/remote/remote_step.h"

namespace tandem {
namespace sync {

using codec::Codec;
using codec::EncodeParams;
using codec::ErrorFeedback;
using codec::MakeInt8Codec;
namespace {

constexpr char kLabel[] = "hybrid sync";
constexpr char kMetaName[] = "hybrid/meta";
constexpr char kResidualsName[] = "hybrid/residuals";
// "TDMH" + layout version: tells saved residuals from zeros.
constexpr int64_t kMagic = 0x54444d48'00000001;
// Meta fields (int64, stored in a float buffer bit for bit).
enum Meta { kMagicField, kWorld, kSize, kInt8ChunkField, kMetaFields };
// Residuals move to and from rank 0 in pieces of this many floats per rank.
constexpr int64_t kStatePiece = kRank0StatePiece;
// Values per int8 scale (the compressed strategy's default).
constexpr int kDefaultInt8Chunk = 1024;

// compress=none|int8: 0 or the int8 chunk.
absl::StatusOr<int> ParseCompress(const SyncOptions& o) {
  const auto it = o.opts.find("compress");
  if (it == o.opts.end() || it->second == "none") return 0;
  if (it->second == "int8") return kDefaultInt8Chunk;
  return absl::InvalidArgumentError(absl::StrCat(
      "--sync_opt compress must be none or int8 for --sync hybrid, got '", it->second, "'"));
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Group g of the layout: chunks [first, end), the largest `block` floats.
struct Group {
  int first = 0;
  int end = 0;
  int64_t block = 0;
  int64_t lo = 0, hi = 0;  // elements covered
};

class HybridSyncImpl final : public GradientSync, public ServerSideCheckpoint {
 public:
  HybridSyncImpl(SyncEnv env, std::unique_ptr<ShardServerState> servers, int int8_chunk)
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
        groups_(MakeGroups(remote_->layout(), local_size_)),
        ready_(BucketReadiness::ForUnits(Units(groups_))),
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
    rs_in_.assign(max_block * local_size_, 0.f);
    rs_out_.assign(max_block, 0.f);
    gather_in_.assign(max_block, 0.f);
    gather_out_.assign(max_block * local_size_, 0.f);
    slice_.assign(slice, 0.f);
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
    group_ready_.assign(groups_.size(), 0);
    thread_ = std::thread([this] { CommLoop(); });
  }

  ~HybridSyncImpl() override {
    {
      absl::MutexLock lock(&mu_);
      shutdown_ = true;
      cv_.SignalAll();
    }
    thread_.join();
  }

  static std::vector<Group> MakeGroups(const shard::ShardLayout& l, int k) {
    std::vector<Group> out;
    for (int first = 0; first < l.num_chunks(); first += k) {
      Group g;
      g.first = first;
      g.end = std::min(first + k, l.num_chunks());
      for (int c = g.first; c < g.end; ++c) g.block = std::max(g.block, l.chunk(c).size());
      g.lo = l.chunk(g.first).lo;
      g.hi = l.chunk(g.end - 1).hi;
      out.push_back(g);
    }
    return out;
  }
  static std::vector<std::pair<int64_t, int64_t>> Units(const std::vector<Group>& groups) {
    std::vector<std::pair<int64_t, int64_t>> u;
    for (const Group& g : groups) u.push_back({g.lo, g.hi});
    return u;
  }

  std::string name() const override { return "hybrid"; }
  // Every rank holds the whole (pulled) vector and none steps it: the
  // checkpointer writes it once, from rank 0, with no optimizer state.
  optim::ParamRange owned_range() const override { return {0, size_}; }
  // The servers' optimizer state, visible to checkpoints (optimizer_mirror.h).
  optim::Optimizer* optimizer() override { return servers_->mirror(); }

  // Before a checkpoint: rank 0 (the one that writes the whole vector)
  // fetches the servers' state of the last applied step.
  absl::Status SyncStateToHost() override {
    if (feedback_ != nullptr) {
      absl::Status s = GatherResiduals();
      if (!s.ok()) return Fail(s);
    }
    if (!step_.initialised()) return absl::OkStatus();
    if (codec_ != nullptr) {
      absl::Status s = ResyncToMaster();
      if (!s.ok()) return Fail(s);
    }
    absl::Status s = servers_->FetchForCheckpoint(world_->rank(), step_.next_step() - 1);
    return s.ok() ? s : Fail(s);
  }

  // Checkpoints written by the servers (server_side_checkpoint.h).
  bool CanSaveOnServers() const override { return step_.initialised() && step_.ok(); }
  void ExpectServerSave() override { servers_->ExpectServerSave(); }
  absl::StatusOr<std::vector<SavedShard>> SaveOnServers(const ServerSaveRequest& r) override {
    absl::StatusOr<std::vector<SavedShard>> s = servers_->SaveOnServers(r, step_.next_step() - 1);
    if (!s.ok()) return Fail(s.status());
    return s;
  }

  // After a restore: the parameters (and maybe state) changed, so the
  // servers are initialised again at the next step.
  absl::Status StateLoaded() override {
    servers_->Loaded(world_->rank());
    step_.Loaded();
    if (feedback_ != nullptr) {
      absl::Status s = ScatterResiduals();
      if (!s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }

  // compress=int8 only: the error-feedback residuals (see hybrid_sync.h).
  std::vector<optim::StateBuffer> extra_state() override {
    if (feedback_ == nullptr) return {};
    AllocateGathered();
    return {{kMetaName, absl::MakeSpan(meta_)}, {kResidualsName, absl::MakeSpan(gathered_)}};
  }

  SyncMemory memory() const override {
    SyncMemory m;
    m.param_bytes = size_ * int64_t{sizeof(float)};
    m.grad_bytes = static_cast<int64_t>(slice_.size()) * int64_t{sizeof(float)};
    m.optimizer_bytes = servers_->mirror()->held_bytes();  // only around checkpoints
    m.staging_bytes = static_cast<int64_t>(rs_in_.size() + rs_out_.size() + gather_in_.size() +
                                           gather_out_.size() + gathered_.size() + piece_.size() +
                                           (feedback_ != nullptr ? size_ : 0)) *
                          int64_t{sizeof(float)} +
                      static_cast<int64_t>(encoded_.size() + pulled_.size());
    return m;
  }

  absl::Status BeginStep(const StepOptions& options) override {
    ASSIGN_OR_RETURN(const bool overlapped, step_.Begin(options));
    // Rank 0's copy of every rank's state served the checkpoint just written
    // or loaded: give its world x state floats back until the next one.
    if (!gathered_.empty()) std::vector<float>().swap(gathered_);
    servers_->ReleaseAfterCheckpoint();
    ready_.Reset();
    if (overlapped) {
      absl::Status s = remote_->BeginPushes(step_.Header(step_.next_step(), step_.pushed_lr()));
      if (!s.ok()) return Fail(s);
    }
    absl::MutexLock lock(&mu_);
    std::fill(group_ready_.begin(), group_ready_.end(), 0);
    groups_done_ = 0;
    push_now_ = overlapped;
    step_open_ = true;
    cv_.SignalAll();
    return absl::OkStatus();
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override {
    ready_.Report(lo, hi, [this](int g) {
      absl::MutexLock lock(&mu_);
      group_ready_[g] = 1;
      cv_.SignalAll();
    });
  }

  absl::Status FinishStep(const optim::StepContext& ctx) override {
    RETURN_IF_ERROR(step_.CheckFinish());
    const auto start = std::chrono::steady_clock::now();
    bool pushed_early = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ready_.complete()) {
        // Release the communication thread before failing.
        step_open_ = false;
        cv_.SignalAll();
        while (comm_busy_) cv_.Wait(&mu_);
      } else {
        while (groups_done_ < static_cast<int>(groups_.size()) && comm_error_.ok()) cv_.Wait(&mu_);
      }
      step_open_ = false;
      cv_.SignalAll();
      pushed_early = push_now_;
      if (!comm_error_.ok()) return Fail(comm_error_);
    }
    if (pushed_early) remote_->ClosePushes();
    auto abandon = [&](absl::Status s) {
      if (pushed_early) (void)remote_->WaitPushes();
      return Fail(std::move(s));
    };
    if (!ready_.complete()) {
      return abandon(absl::FailedPreconditionError(absl::StrCat(
          "hybrid sync: backward reported ", ready_.emitted(), " of ", ready_.size(),
          " chunk groups completely at step ", ctx.step, " (ranges missing or repeated)")));
    }
    if (absl::Status s = step_.Prepare(ctx); !s.ok()) return abandon(s);
    if (pushed_early) {
      if (absl::Status s = step_.CheckPushedLr(ctx); !s.ok()) return abandon(s);
    }
    if (!pushed_early) {
      absl::Status s = remote_->BeginPushes(step_.Header(ctx.step, ctx.lr));
      if (!s.ok()) return Fail(s);
      for (size_t g = 0; g < groups_.size(); ++g) PushMine(static_cast<int>(g));
      remote_->ClosePushes();
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
      const int mine = groups_[g].first + local_rank_;
      if (mine >= groups_[g].end) continue;
      if (codec_ != nullptr) {
        remote_->PullDelta(mine, ctx.step, pulled_.data() + encoded_offset_[g]);
      } else {
        remote_->Pull(mine, ctx.step, params_);
      }
    }
    absl::Status s = remote_->WaitPushes();
    if (!s.ok()) return Fail(s);
    double residual_sq = 0;
    if (feedback_ != nullptr) {
      for (const Group& g : groups_) {
        const int mine = g.first + local_rank_;
        if (mine >= g.end) continue;
        const shard::Chunk& c = remote_->layout().chunk(mine);
        residual_sq += feedback_->SumOfSquares(c.lo, c.size());
      }
    }
    // Allgather each group inside the node as soon as this rank's chunk of
    // it has arrived.
    const auto gather_start = std::chrono::steady_clock::now();
    for (size_t g = 0; g < groups_.size(); ++g) {
      s = GatherGroup(static_cast<int>(g), ctx.step, /*delta=*/codec_ != nullptr);
      if (!s.ok()) {
        (void)remote_->WaitAllPulls();
        return Fail(s);
      }
    }
    s = remote_->WaitAllPulls();
    if (!s.ok()) return Fail(s);
    step_.Done();
    absl::MutexLock lock(&mu_);
    ++steps_;
    residual_norm_ = std::sqrt(residual_sq);
    gather_seconds_ += Since(gather_start);
    wait_seconds_ += Since(start);
    return absl::OkStatus();
  }

  SyncStats stats() const override {
    const shard::RemoteStats r = remote_->stats();
    SyncStats s;
    absl::MutexLock lock(&mu_);
    s.steps = steps_;
    s.buckets = collectives_;
    s.bytes_sent = r.pushed_bytes + intra_bytes_;
    s.inter_node_bytes = r.pushed_bytes + r.pulled_bytes;
    s.comm_seconds = comm_seconds_ + wait_seconds_;
    s.exposed_wait_seconds = wait_seconds_;
    s.compress_bytes_before = compress_before_;
    s.compress_bytes_after = compress_after_;
    s.residual_norm = residual_norm_;
    return s;
  }

 private:
  // Pushes this rank's chunk of group g; with compress=int8 encoded first
  // (its residual added and updated). One thread at a time (the
  // communication thread, or the trainer thread when pushes wait for
  // FinishStep); the encoded block stays unchanged until WaitPushes.
  void PushMine(int g) {
    const int mine = groups_[g].first + local_rank_;
    if (mine >= groups_[g].end) return;
    const float* values = slice_.data() + slice_offset_[g];
    if (feedback_ == nullptr) {
      remote_->Push(mine, values);
      return;
    }
    const shard::Chunk& c = remote_->layout().chunk(mine);
    uint8_t* block = encoded_.data() + encoded_offset_[g];
    const int64_t bytes = feedback_->Encode(values, c.lo, c.size(), EncodeParams{}, block);
    remote_->Push(mine, block);
    absl::MutexLock lock(&mu_);
    compress_before_ += c.size() * int64_t{sizeof(float)};
    compress_after_ += bytes;
  }

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
  absl::Status ResyncToMaster() {
    const int64_t step = step_.next_step() - 1;
    for (size_t g = 0; g < groups_.size(); ++g) {
      const int mine = groups_[g].first + local_rank_;
      if (mine < groups_[g].end) remote_->Pull(mine, step, params_, /*reset_delta_reference=*/true);
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
      absl::Status s = GatherGroup(static_cast<int>(g), step, /*delta=*/false);
      if (!s.ok()) {
        (void)remote_->WaitAllPulls();
        return s;
      }
    }
    return remote_->WaitAllPulls();
  }

  // Every rank's residuals onto rank 0 (collective over the world group).
  absl::Status GatherResiduals() {
    AllocateGathered();
    const int world = world_->world_size();
    const absl::Span<float> mine = feedback_->residuals();
    RETURN_IF_ERROR(GatherOntoRank0(*world_, kLabel, "residuals", mine.data(), size_,
                                    gathered_.data(), piece_.data()));
    if (world_->rank() == 0) {
      PutMeta(kMagicField, kMagic);
      PutMeta(kWorld, world);
      PutMeta(kSize, size_);
      PutMeta(kInt8ChunkField, int8_chunk_);
    }
    return absl::OkStatus();
  }

  // Rank 0 holds what the checkpoint had: it checks that it fits and sends
  // each rank its own residuals (collective over the world group).
  absl::Status ScatterResiduals() {
    AllocateGathered();
    const int world = world_->world_size();
    const int rank = world_->rank();
    int64_t fits = 0;
    if (rank == 0) {
      const bool saved = GetMeta(kMagicField) == kMagic;
      fits = saved && GetMeta(kWorld) == world && GetMeta(kSize) == size_ &&
             GetMeta(kInt8ChunkField) == int8_chunk_;
      if (!saved) {
        LOG(INFO) << kLabel << ": no saved compression state (a fresh start, or a checkpoint of "
                  << "another strategy or of compress=none): error-feedback residuals start from "
                  << "zero";
      } else if (!fits) {
        LOG(WARNING) << kLabel << ": the checkpoint's residuals were saved at world size "
                     << GetMeta(kWorld) << ", " << GetMeta(kSize) << " values, int8 chunk "
                     << GetMeta(kInt8ChunkField) << "; this run has " << world << ", " << size_
                     << ", " << int8_chunk_ << ": error-feedback residuals reset to zero";
      }
    }
    absl::Status s = world_->Broadcast(&fits, sizeof(fits), 0);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(kLabel, ": sending the checkpoint's residuals "
                                                 "from rank 0: ", s.message()));
    }
    if (fits != 1) {
      feedback_->Reset();
      return absl::OkStatus();
    }
    return SendBackFromRank0(*world_, kLabel, "residuals", gathered_.data(), size_,
                             feedback_->residuals().data(), piece_.data());
  }

  // Communication thread: reduce-scatter group g inside the node; this
  // rank's chunk of the node sum lands in slice_.
  absl::Status ReduceGroup(int g) {
    const Group& gr = groups_[g];
    const shard::ShardLayout& l = remote_->layout();
    const int mine = gr.first + local_rank_;
    if (local_size_ == 1) {
      if (mine < gr.end) {
        const shard::Chunk& c = l.chunk(mine);
        std::memcpy(slice_.data() + slice_offset_[g], grads_ + c.lo, c.size() * sizeof(float));
      }
      return absl::OkStatus();
    }
    for (int j = 0; j < local_size_; ++j) {
      float* block = rs_in_.data() + j * gr.block;
      int64_t n = 0;
      if (gr.first + j < gr.end) {
        const shard::Chunk& c = l.chunk(gr.first + j);
        n = c.size();
        std::memcpy(block, grads_ + c.lo, n * sizeof(float));
      }
      std::fill(block + n, block + gr.block, 0.f);
    }
    absl::Status s = intra_->ReduceScatter(rs_in_.data(), rs_out_.data(), gr.block);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("hybrid sync: intra-node reduce-scatter of chunk "
                                                 "group ", g, " on rank ", world_->rank(), ": ",
                                                 s.message()));
    }
    if (mine < gr.end) {
      std::memcpy(slice_.data() + slice_offset_[g], rs_out_.data(),
                  l.chunk(mine).size() * sizeof(float));
    }
    absl::MutexLock lock(&mu_);
    intra_bytes_ += gr.block * local_size_ * int64_t{sizeof(float)};
    ++collectives_;
    return absl::OkStatus();
  }

  // Trainer thread: this rank's pulled chunk of group g -> the node. delta:
  // the pull was the chunk's int8 delta block, added to the parameters here.
  absl::Status GatherGroup(int g, int64_t step, bool delta) {
    const Group& gr = groups_[g];
    const shard::ShardLayout& l = remote_->layout();
    const int mine = gr.first + local_rank_;
    if (mine < gr.end) {
      RETURN_IF_ERROR(remote_->WaitPulled(mine));
      if (delta) {
        const shard::Chunk& c = l.chunk(mine);
        codec_->DecodeAdd(pulled_.data() + encoded_offset_[g], c.size(), params_ + c.lo);
        absl::MutexLock lock(&mu_);
        compress_before_ += c.size() * int64_t{sizeof(float)};
        compress_after_ += codec_->MaxEncodedBytes(c.size());
      }
    }
    if (local_size_ == 1) return absl::OkStatus();
    int64_t n = 0;
    if (mine < gr.end) {
      const shard::Chunk& c = l.chunk(mine);
      n = c.size();
      std::memcpy(gather_in_.data(), params_ + c.lo, n * sizeof(float));
    }
    std::fill(gather_in_.begin() + n, gather_in_.begin() + gr.block, 0.f);
    absl::Status s =
        intra_->AllGather(gather_in_.data(), gather_out_.data(), gr.block * int64_t{sizeof(float)});
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("hybrid sync: intra-node allgather of chunk group ",
                                                 g, " at step ", step, " on rank ", world_->rank(),
                                                 ": ", s.message()));
    }
    for (int j = 0; j < local_size_; ++j) {
      if (j == local_rank_ || gr.first + j >= gr.end) continue;
      const shard::Chunk& c = l.chunk(gr.first + j);
      std::memcpy(params_ + c.lo, gather_out_.data() + j * gr.block, c.size() * sizeof(float));
    }
    absl::MutexLock lock(&mu_);
    intra_bytes_ += gr.block * int64_t{sizeof(float)};
    ++collectives_;
    return absl::OkStatus();
  }

  void CommLoop() {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        while (!shutdown_ && !step_open_) cv_.Wait(&mu_);
        if (shutdown_) return;
        comm_busy_ = true;
      }
      // Last group first: backward produces the end of the vector first,
      // and every rank of the node issues the same order.
      for (int i = static_cast<int>(groups_.size()) - 1; i >= 0; --i) {
        bool push = false;
        {
          absl::MutexLock lock(&mu_);
          while (!shutdown_ && step_open_ && !group_ready_[i]) cv_.Wait(&mu_);
          if (shutdown_ || !step_open_) break;
          push = push_now_;
        }
        const auto t = std::chrono::steady_clock::now();
        absl::Status s = ReduceGroup(i);
        if (s.ok() && push) PushMine(i);
        absl::MutexLock lock(&mu_);
        comm_seconds_ += Since(t);
        if (!s.ok()) {
          comm_error_ = s;
          cv_.SignalAll();
          break;
        }
        ++groups_done_;
        cv_.SignalAll();
      }
      absl::MutexLock lock(&mu_);
      comm_busy_ = false;
      // Wait for FinishStep to close the step before looking for the next.
      while (!shutdown_ && step_open_ && comm_error_.ok() &&
             groups_done_ == static_cast<int>(groups_.size())) {
        cv_.Wait(&mu_);
      }
      cv_.SignalAll();
      if (!comm_error_.ok()) {
        while (!shutdown_) cv_.Wait(&mu_);
        return;
      }
    }
  }

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
  const std::vector<Group> groups_;
  BucketReadiness ready_;  // backward thread during a step
  RemoteStep step_;       // trainer thread: protocol, server init, step count, header

  // Sized once.
  std::vector<int64_t> slice_offset_;  // per group: where this rank's chunk sits in slice_
  std::vector<float> slice_;           // this rank's chunks, node-reduced
  std::vector<float> rs_in_, rs_out_, gather_in_, gather_out_;
  // compress=int8: residuals by flat offset, this step's encoded blocks.
  std::unique_ptr<ErrorFeedback> feedback_;
  std::vector<int64_t> encoded_offset_;  // per group
  std::vector<uint8_t> encoded_;
  std::vector<uint8_t> pulled_;  // this step's pulled delta blocks, same layout
  // Checkpoint state (trainer thread, between steps).
  std::vector<float> meta_ = std::vector<float>(2 * kMetaFields, 0.f);
  std::vector<float> gathered_;  // rank 0, around a checkpoint: world * size_
  std::vector<float> piece_;     // world * kStatePiece (or less)


  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<char> group_ready_ ABSL_GUARDED_BY(mu_);
  int groups_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool step_open_ ABSL_GUARDED_BY(mu_) = false;
  bool push_now_ ABSL_GUARDED_BY(mu_) = false;
  bool comm_busy_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status comm_error_ ABSL_GUARDED_BY(mu_);
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t collectives_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t intra_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  double comm_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double gather_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compress_before_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t compress_after_ ABSL_GUARDED_BY(mu_) = 0;
  double residual_norm_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: runs CommLoop over the members above
};

}  // namespace

std::vector<OptionInfo> HybridSyncOptionInfo() {
  std::vector<OptionInfo> o = RemoteSyncOptionInfo();
  o.push_back({"compress", "none",
               "none: fp32 pushes and pulls; int8: pushes as int8 with a scale per 1024 values "
               "and error feedback kept per rank (the servers sum in fp32), pulls as int8 "
               "parameter deltas with the error feedback kept on the servers"});
  return o;
}

absl::Status ValidateHybridSyncOptions(const SyncOptions& options) {
  RETURN_IF_ERROR(ValidateRemoteSyncOptions(options));
  return ParseCompress(options).status();
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateHybridSync(const SyncOptions& options,
                                                              SyncEnv env) {
  RETURN_IF_ERROR(ValidateHybridSyncOptions(options));
  ASSIGN_OR_RETURN(const int int8_chunk, ParseCompress(options));
  if (env.comms->intra == nullptr) {
    return absl::InvalidArgumentError("hybrid sync: needs the intra-node group");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ShardServerState> servers,
                   ShardServerState::Create(options, env, "hybrid", int8_chunk));
  return std::unique_ptr<GradientSync>(
      std::make_unique<HybridSyncImpl>(std::move(env), std::move(servers), int8_chunk));
}

}  // namespace sync
}  // namespace tandem
