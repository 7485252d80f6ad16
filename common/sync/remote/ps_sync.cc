#include "common/sync/remote/ps_sync.h"

#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/shard/remote_shards.h"
#include "common/status/status_macros.h"
#include "common/sync/bucket/bucket_readiness.h"
#include "common/sync/remote/shard_server_state.h"
#include "common/sync/remote/remote_step.h"
#include "common/tensor/param_hook.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {

namespace {

class PsSyncImpl final : public GradientSync, public ServerSideCheckpoint, public tensor::ParamHook {
 public:
  PsSyncImpl(SyncEnv env, std::unique_ptr<ShardServerState> servers)
      : world_(env.comms->world.get()),
        params_(env.params),
        grads_(env.grads),
        size_(env.size),
        servers_(std::move(servers)),
        remote_(&servers_->remote()),
        pipeline_(servers_->pipeline()),
        ready_(BucketReadiness::ForUnits(Units(remote_->layout()))),
        step_(RemoteStepOptions{"ps sync", env.shard_servers.generation, world_, servers_.get(),
                                params_, std::move(env.shard_servers.learning_rate)}) {}

  static std::vector<std::pair<int64_t, int64_t>> Units(const shard::ShardLayout& l) {
    std::vector<std::pair<int64_t, int64_t>> u;
    for (const shard::Chunk& c : l.chunks()) u.push_back({c.lo, c.hi});
    return u;
  }

  std::string name() const override { return "ps"; }
  // Every rank holds the whole (pulled) vector and none steps it: the
  // checkpointer writes it once, from rank 0, with no optimizer state.
  optim::ParamRange owned_range() const override { return {0, size_}; }
  // The servers' optimizer state, visible to checkpoints (optimizer_mirror.h).
  optim::Optimizer* optimizer() override { return servers_->mirror(); }

  // pipeline=1: the model asks for each layer through this hook.
  tensor::ParamHook* param_hook() override { return pipeline_ ? this : nullptr; }

  // ParamHook (trainer thread): [lo, hi) holds the step's parameters once
  // the chunks under it are pulled; the others may still be in flight.
  absl::Status Gather(int64_t lo, int64_t hi, tensor::ParamPass) override {
    if (!pulls_out_) return absl::OkStatus();
    int first = 0, end = 0;
    remote_->layout().ChunksMeeting(lo, hi, &first, &end);
    const auto start = std::chrono::steady_clock::now();
    for (int c = first; c < end; ++c) {
      if (absl::Status s = remote_->WaitPulled(c); !s.ok()) return Fail(s);
    }
    AddWait(SecondsSince(start));
    return absl::OkStatus();
  }
  void Release(int64_t, int64_t, tensor::ParamPass) override {}

  // Before a checkpoint: rank 0 (the one that writes the whole vector)
  // fetches the servers' state of the last applied step.
  absl::Status SyncStateToHost() override {
    RETURN_IF_ERROR(WaitForPulls());
    if (!step_.initialised()) return absl::OkStatus();
    absl::Status s = servers_->FetchForCheckpoint(world_->rank(), step_.next_step() - 1);
    return s.ok() ? s : Fail(s);
  }

  // Checkpoints written by the servers (server_side_checkpoint.h).
  bool CanSaveOnServers() const override { return step_.initialised() && step_.ok(); }
  void ExpectServerSave() override { servers_->ExpectServerSave(); }
  absl::StatusOr<std::vector<SavedShard>> SaveOnServers(const ServerSaveRequest& r) override {
    RETURN_IF_ERROR(WaitForPulls());
    absl::StatusOr<std::vector<SavedShard>> s = servers_->SaveOnServers(r, step_.next_step() - 1);
    if (!s.ok()) return Fail(s.status());
    return s;
  }

  absl::StatusOr<ServerWrite> SnapshotOnServers(const ServerSaveRequest& r) override {
    RETURN_IF_ERROR(WaitForPulls());
    absl::StatusOr<ServerWrite> w = servers_->SnapshotOnServers(r, step_.next_step() - 1);
    if (!w.ok()) return Fail(w.status());
    return w;
  }
  bool ServersReplicate() const override { return servers_->remote().replicated(); }
  absl::StatusOr<std::vector<int>> RecoverFromServers(int64_t step, float* params) override {
    return servers_->RecoverFromServers(world_->rank(), step, params);
  }

  // After a restore: the parameters (and maybe state) changed, so the
  // servers are initialised again at the next step.
  absl::Status StateLoaded() override {
    RETURN_IF_ERROR(WaitForPulls());
    servers_->Loaded(world_->rank());
    step_.Loaded();
    return absl::OkStatus();
  }

  SyncMemory memory() const override {
    SyncMemory m;
    m.param_bytes = size_ * int64_t{sizeof(float)};
    m.grad_bytes = 0;  // backward's buffer is the model's; nothing reduced is kept
    m.optimizer_bytes = servers_->mirror()->held_bytes();  // only around checkpoints
    m.staging_bytes = 0;  // pushes send from the gradient buffer, pulls land in params
    return m;
  }

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(WaitForPulls());
    ASSIGN_OR_RETURN(overlapped_, step_.Begin(options));
    servers_->ReleaseAfterCheckpoint();
    ready_.Reset();
    if (overlapped_) {
      absl::Status s = remote_->BeginPushes(step_.Header(step_.next_step(), step_.pushed_lr()));
      if (!s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override {
    ready_.Report(lo, hi, [this](int c) {
      if (overlapped_) PushChunk(c, step_.next_step());
    });
  }

  absl::Status FinishStep(const optim::StepContext& ctx) override {
    RETURN_IF_ERROR(step_.CheckFinish());
    const auto start = std::chrono::steady_clock::now();
    if (!ready_.complete()) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "ps sync: backward reported ", ready_.completed(), " of ", ready_.size(),
          " chunks completely at step ", ctx.step, " (ranges missing or repeated)")));
    }
    if (absl::Status s = step_.Prepare(ctx); !s.ok()) return Fail(s);
    if (overlapped_) {
      if (absl::Status s = step_.CheckPushedLr(ctx); !s.ok()) {
        remote_->ClosePushes();
        (void)remote_->WaitPushes();
        return Fail(s);
      }
    } else {
      absl::Status s = remote_->BeginPushes(step_.Header(ctx.step, ctx.lr));
      if (!s.ok()) return Fail(s);
      for (int c = 0; c < remote_->layout().num_chunks(); ++c) PushChunk(c, ctx.step);
    }
    remote_->ClosePushes();
    if (!pipeline_) {
      for (int c = 0; c < remote_->layout().num_chunks(); ++c) remote_->Pull(c, ctx.step, params_);
    }
    pulls_out_ = true;
    absl::Status pushed = remote_->WaitPushes();
    if (!pushed.ok()) {
      (void)WaitForPulls();
      return Fail(pushed);
    }
    // pipeline=0: everything lands before FinishStep returns; pipeline=1:
    // the next forward waits layer by layer (Gather), and the next step or
    // checkpoint for whatever it did not touch.
    if (!pipeline_) RETURN_IF_ERROR(WaitForPulls());
    step_.Done();
    absl::MutexLock lock(&mu_);
    ++steps_;
    wait_seconds_ += SecondsSince(start);
    return absl::OkStatus();
  }

  SyncStats stats() const override {
    const shard::RemoteStats r = remote_->stats();
    SyncStats s;
    absl::MutexLock lock(&mu_);
    s.steps = steps_;
    s.buckets = steps_ * remote_->layout().num_chunks();
    s.bytes_sent = r.pushed_bytes;
    s.inter_node_bytes = r.pushed_bytes + r.pulled_bytes;  // servers are other machines
    s.comm_seconds = wait_seconds_;
    s.exposed_wait_seconds = wait_seconds_;
    return s;
  }

 private:
  absl::Status Fail(absl::Status s) { return step_.Fail(std::move(s)); }

  // Chunk c's push and, pipelined, its pull right behind it: the server
  // answers the pull once every rank's push of c is applied, while the
  // later chunks are still being pushed (both directions of the link busy).
  // The pull lands in the parameters: backward is done with chunk c.
  void PushChunk(int c, int64_t step) {
    remote_->Push(c, grads_ + remote_->layout().chunk(c).lo);
    if (pipeline_) remote_->Pull(c, step, params_);
  }

  // Trainer thread: the last step's pulls are all in (or failed).
  absl::Status WaitForPulls() {
    if (!pulls_out_) return absl::OkStatus();
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = remote_->WaitAllPulls();
    pulls_out_ = false;
    AddWait(SecondsSince(start));
    return s.ok() ? s : Fail(s);
  }

  void AddWait(double seconds) {
    absl::MutexLock lock(&mu_);
    wait_seconds_ += seconds;
  }

  Communicator* const world_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const std::unique_ptr<ShardServerState> servers_;
  shard::RemoteShards* const remote_;  // servers_'s connection
  const bool pipeline_;    // --sync_opt pipeline
  BucketReadiness ready_;  // backward thread during a step, trainer otherwise

  RemoteStep step_;          // the step protocol, server init, step count, header
  bool overlapped_ = false;  // this step's pushes started during backward
  bool pulls_out_ = false;   // trainer thread: the last step's pulls may be in flight

  mutable absl::Mutex mu_;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> CreatePsSync(const SyncOptions& options,
                                                          SyncEnv env) {
  RETURN_IF_ERROR(ValidateRemoteSyncOptions(options));
  ASSIGN_OR_RETURN(std::unique_ptr<ShardServerState> servers,
                   ShardServerState::Create(options, env, "ps"));
  auto sync = std::make_unique<PsSyncImpl>(std::move(env), std::move(servers));
  return std::unique_ptr<GradientSync>(std::move(sync));
}

}  // namespace sync
}  // namespace tandem
