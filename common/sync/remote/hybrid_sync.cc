#include "common/sync/remote/hybrid_sync.h"

#include "common/shard/shard_layout.h"
#include "common/sync/remote/hybrid_split.h"
#include "common/sync/remote/hybrid_sync_internal.h"

namespace tandem {
namespace sync {
namespace hybrid_internal {

absl::Status HybridSyncImpl::BeginStep(const StepOptions& options) {
  RETURN_IF_ERROR(WaitLanded());
  ASSIGN_OR_RETURN(const bool overlapped, step_.Begin(options));
  // Rank 0's copy of every rank's state served the checkpoint just written
  // or loaded: give its world x state floats back until the next one.
  if (!gathered_.empty()) std::vector<float>().swap(gathered_);
  servers_->ReleaseAfterCheckpoint();
  if (ring_ != nullptr) ring_->Release();
  ready_.Reset();
  if (overlapped) {
    absl::Status s = remote_->BeginPushes(step_.Header(step_.next_step(), step_.pushed_lr()));
    if (!s.ok()) return Fail(s);
  }
  absl::MutexLock lock(&mu_);
  push_now_ = overlapped;
  push_step_ = step_.next_step();
  step_open_ = true;
  return absl::OkStatus();
}

void HybridSyncImpl::OnGradientsReady(int64_t lo, int64_t hi) {
  // Units are the groups last first (Units): unit u is group G - 1 - u;
  // unit G the ring part.
  const int groups = static_cast<int>(groups_.size());
  ready_.Report(lo, hi, [this, groups](int u) {
    if (u == groups) {
      executor_->Enqueue({CommOp::kRing, 0, 0});
    } else {
      executor_->Enqueue({CommOp::kReduce, groups - 1 - u, 0});
    }
  });
}

absl::Status HybridSyncImpl::FinishStep(const optim::StepContext& ctx) {
  RETURN_IF_ERROR(step_.CheckFinish());
  const auto start = std::chrono::steady_clock::now();
  bool pushed_early = false;
  if (!ready_.complete()) {
    // Abandon the step: the groups still queued are skipped.
    absl::MutexLock lock(&mu_);
    step_open_ = false;
  }
  // Every queued group has run or been skipped; a group's error is
  // comm_error_, set by RunGroup.
  (void)executor_->Drain();
  {
    absl::MutexLock lock(&mu_);
    step_open_ = false;
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
        "hybrid sync: backward reported ", ready_.completed(), " of ", ready_.size(),
        " chunk groups completely at step ", ctx.step, " (ranges missing or repeated)")));
  }
  if (absl::Status s = step_.Prepare(ctx); !s.ok()) return abandon(s);
  if (pushed_early) {
    if (absl::Status s = step_.CheckPushedLr(ctx); !s.ok()) return abandon(s);
  }
  // The ring part was summed during backward (RunRing): step it here, as
  // allreduce does, while the servers apply the rest.
  if (ring_ != nullptr) {
    if (absl::Status s = ring_->Step(ctx, step_.grad_scale()); !s.ok()) return abandon(s);
  }
  if (!pushed_early) {
    absl::Status s = remote_->BeginPushes(step_.Header(ctx.step, ctx.lr));
    if (!s.ok()) return Fail(s);
    for (size_t g = 0; g < groups_.size(); ++g) PushMine(static_cast<int>(g), ctx.step);
    remote_->ClosePushes();
  }
  // pipeline=1: each pull went out right behind its push.
  if (!pipeline_) {
    for (size_t g = 0; g < groups_.size(); ++g) PullMine(static_cast<int>(g), ctx.step);
  }
  if (absl::Status s = remote_->WaitPushes(); !s.ok()) {
    (void)remote_->WaitAllPulls();
    return Fail(s);
  }
  double residual_sq = 0;
  if (feedback_ != nullptr) {
    for (const Group& g : groups_) {
      const int mine = g.first + local_rank_;
      if (mine >= g.end) continue;
      const shard::Chunk& c = remote_->layout().chunk(mine);
      residual_sq += feedback_->SumOfSquares(c.lo, c.size());
    }
  }
  // Each group lands (this rank's pull, then the node allgather) on the
  // communication thread as soon as its pull is in. pipeline=1: the next
  // forward waits layer by layer (Gather); pipeline=0: all of it here.
  QueueLandings(ctx.step);
  {
    absl::MutexLock lock(&mu_);
    wait_seconds_ += SecondsSince(start);
  }
  if (!pipeline_) RETURN_IF_ERROR(WaitLanded());
  step_.Done();
  absl::MutexLock lock(&mu_);
  ++steps_;
  residual_norm_ = std::sqrt(residual_sq);
  return absl::OkStatus();
}

}  // namespace hybrid_internal

namespace {

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

// --sync_opt ring_share as named: "auto" or a share (checked by
// ChooseRingSplit); "0" when not named (validation only: RingSize applies
// the default).
std::string RingShareSpec(const SyncOptions& o) {
  const auto it = o.opts.find("ring_share");
  return it == o.opts.end() ? "0" : it->second;
}

// ring_share's prefix of the vector, or 0; rank 0 logs how it was chosen.
// Not named: DefaultRingShare (auto where the servers keep no replicas).
absl::StatusOr<int64_t> RingSize(const SyncOptions& options, const SyncEnv& env) {
  const int servers = static_cast<int>(env.shard_servers.addresses.size());
  std::string spec = RingShareSpec(options);
  const bool named = options.opts.count("ring_share") > 0;
  if (!named) {
    ASSIGN_OR_RETURN(const int64_t replicate, GetSyncOptInt(options, "replicate", 1));
    ASSIGN_OR_RETURN(const int int8_chunk, ParseCompress(options));
    spec = DefaultRingShare(servers, replicate != 0, int8_chunk > 0);
  }
  if (spec == "0") return 0;
  ASSIGN_OR_RETURN(const RemoteSyncKnobs knobs, ParseRemoteSyncKnobs(options));
  RingSplitInputs in;
  in.spec = spec;
  in.nodes = env.comms->num_nodes;
  in.servers = servers;
  in.size = env.size;
  in.unit = shard::ShardLayout::ChunkElementsForMb(knobs.chunk_mb) * env.comms->intra->world_size();
  ASSIGN_OR_RETURN(const RingSplit split, ChooseRingSplit(in));
  if (env.comms->world->rank() == 0) {
    LOG(INFO) << "hybrid: " << split.why
              << (named ? "" : " (the default where the shard servers keep no replicas: one "
                               "server or replicate=0)");
  }
  return split.ring_size;
}

}  // namespace

using hybrid_internal::HybridSyncImpl;

std::vector<OptionInfo> HybridSyncOptionInfo() {
  std::vector<OptionInfo> o = RemoteSyncOptionInfo();
  o.push_back({"compress", "none",
               "none: fp32 pushes and pulls; int8: pushes as int8 with a scale per 1024 values "
               "and error feedback kept per rank (the servers sum in fp32), pulls as int8 "
               "parameter deltas with the error feedback kept on the servers"});
  o.push_back({"ring_share", "0 or auto",
               "auto | F in [0, 1); default auto where the shard servers keep no replicas (one "
               "server, or replicate=0), else 0: this share of the vector (its first layers, whole chunk "
               "groups) is summed by a ring among the nodes and stepped on the workers, the rest "
               "goes through the shard servers; auto picks F so node and server links are equally "
               "busy (0 with as many servers as nodes), see docs/user-guide.md"});
  return o;
}

absl::Status ValidateHybridSyncOptions(const SyncOptions& options) {
  RETURN_IF_ERROR(ValidateRemoteSyncOptions(options));
  ASSIGN_OR_RETURN(const int int8_chunk, ParseCompress(options));
  const std::string spec = RingShareSpec(options);
  RETURN_IF_ERROR(ChooseRingSplit({spec, 2, 1, 0, 1}).status());
  if (spec != "0" && int8_chunk > 0) {
    return absl::InvalidArgumentError(
        "--sync_opt ring_share needs compress=none for --sync hybrid (the ring part is fp32); "
        "drop one of them");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateHybridSync(const SyncOptions& options,
                                                              SyncEnv env) {
  RETURN_IF_ERROR(ValidateHybridSyncOptions(options));
  ASSIGN_OR_RETURN(const int int8_chunk, ParseCompress(options));
  if (env.comms->intra == nullptr) {
    return absl::InvalidArgumentError("hybrid sync: needs the intra-node group");
  }
  ASSIGN_OR_RETURN(const int64_t ring_size, RingSize(options, env));
  std::unique_ptr<HybridRing> ring;
  SyncOptions server_options = options;
  if (ring_size > 0) {
    // The ring takes the prefix; the servers (and the rest of the strategy)
    // see the vector after it.
    ASSIGN_OR_RETURN(ring, HybridRing::Create(env, ring_size));
    env.params += ring_size;
    env.grads += ring_size;
    env.size -= ring_size;
    // A server's replica could not restore the ring part's state (on the
    // workers): no replicas, so they cost the servers' links nothing.
    server_options.opts["replicate"] = "0";
    if (env.comms->world->rank() == 0) {
      LOG(INFO) << "hybrid: ring_share > 0 turns the shard servers' replicas off (the ring "
                   "part's optimizer state is on the workers): a lost server resumes from the "
                   "last checkpoint";
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ShardServerState> servers,
                   ShardServerState::Create(server_options, env, "hybrid", int8_chunk,
                                            env.comms->intra->world_size(),
                                            env.comms->intra->rank()));
  return std::unique_ptr<GradientSync>(std::make_unique<HybridSyncImpl>(
      std::move(env), std::move(servers), int8_chunk, std::move(ring)));
}

}  // namespace sync
}  // namespace tandem
