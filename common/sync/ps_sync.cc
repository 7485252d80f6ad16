#include "common/sync/ps_sync.h"

#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/shard/optimizer_config.h"
#include "common/shard/remote_shards.h"
#include "common/status/status_macros.h"
#include "common/sync/chunk_readiness.h"
#include "common/sync/optimizer_mirror.h"

namespace tandem {
namespace sync {

std::vector<OptionInfo> RemoteSyncOptionInfo() {
  return {{"chunk_mb", "4", "MiB of fp32 per chunk pushed to / pulled from a shard server"},
          {"streams", "2", "push/pull streams in flight per shard server (1..16)"},
          {"timeout_s", "60", "seconds one push stream or pull may take"},
          {"apply", "step",
           "step: servers apply a step once all of it is in; chunk: each chunk as soon as it is "
           "(pulls overlap pushes)"}};
}

absl::StatusOr<RemoteSyncKnobs> ParseRemoteSyncKnobs(const SyncOptions& o) {
  RemoteSyncKnobs k;
  ASSIGN_OR_RETURN(k.chunk_mb, GetSyncOptDouble(o, "chunk_mb", 4));
  ASSIGN_OR_RETURN(int64_t streams, GetSyncOptInt(o, "streams", 2));
  ASSIGN_OR_RETURN(double timeout_s, GetSyncOptDouble(o, "timeout_s", 60));
  if (!(k.chunk_mb > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt chunk_mb must be > 0, got ", k.chunk_mb));
  }
  if (streams < 1 || streams > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt streams must be in 1..16, got ", streams));
  }
  if (!(timeout_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt timeout_s must be > 0, got ", timeout_s));
  }
  k.streams = static_cast<int>(streams);
  const auto apply = o.opts.find("apply");
  if (apply != o.opts.end() && apply->second != "step" && apply->second != "chunk") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sync_opt apply must be step or chunk, got '", apply->second, "'"));
  }
  k.apply_per_chunk = apply != o.opts.end() && apply->second == "chunk";
  k.timeout = absl::Seconds(timeout_s);
  return k;
}

absl::Status ValidateRemoteSyncOptions(const SyncOptions& o) {
  if (o.max_grad_norm > 0) {
    return absl::UnimplementedError(absl::StrCat(
        "--sync ", o.strategy,
        " does not support max_grad_norm yet (the global norm lives on the shard servers); "
        "use --sync allreduce or zero1/zero2 for clipping"));
  }
  return ParseRemoteSyncKnobs(o).status();
}

namespace {

class PsSyncImpl final : public GradientSync {
 public:
  PsSyncImpl(SyncEnv env, std::unique_ptr<shard::RemoteShards> remote, v1::OptimizerConfig opt,
             std::unique_ptr<OptimizerMirror> mirror)
      : generation_(env.shard_servers.generation),
        world_(env.comms->world.get()),
        params_(env.params),
        grads_(env.grads),
        size_(env.size),
        learning_rate_(std::move(env.shard_servers.learning_rate)),
        remote_(std::move(remote)),
        optimizer_config_(std::move(opt)),
        mirror_(std::move(mirror)),
        ready_(Units(remote_->layout())) {}

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
  optim::Optimizer* optimizer() override { return mirror_.get(); }

  // Before a checkpoint: rank 0 (the one that writes the whole vector)
  // fetches the servers' state of the last applied step.
  absl::Status SyncStateToHost() override {
    if (!initialised_ || world_->rank() != 0) return absl::OkStatus();
    mirror_->Materialize();
    for (size_t i = 0; i < mirror_->names().size(); ++i) {
      absl::Status s = remote_->PullState(next_step_ - 1, mirror_->names()[i], mirror_->buffer(i));
      if (!s.ok()) return Fail(s);
    }
    release_mirror_ = true;
    return absl::OkStatus();
  }

  // After a restore: the parameters (and maybe state) changed, so the
  // servers are initialised again at the next step; rank 0 sends the
  // restored state unless it is all zeros (a fresh start).
  absl::Status StateLoaded() override {
    send_state_ = false;
    if (world_->rank() == 0 && mirror_->materialized()) {
      for (size_t i = 0; i < mirror_->names().size() && !send_state_; ++i) {
        const float* b = mirror_->buffer(i);
        for (int64_t j = 0; j < size_ && !send_state_; ++j) send_state_ = b[j] != 0.f;
      }
    }
    if (!send_state_) mirror_->Release();
    initialised_ = false;
    return absl::OkStatus();
  }

  SyncMemory memory() const override {
    SyncMemory m;
    m.param_bytes = size_ * int64_t{sizeof(float)};
    m.grad_bytes = 0;  // backward's buffer is the model's; nothing reduced is kept
    m.optimizer_bytes = mirror_->held_bytes();  // only around checkpoints
    m.staging_bytes = 0;  // pushes send from the gradient buffer, pulls land in params
    return m;
  }

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(CheckUsable("BeginStep"));
    if (in_step_) {
      return absl::FailedPreconditionError("ps sync: BeginStep called twice without FinishStep");
    }
    if (!std::isfinite(options.grad_scale)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ps sync: grad_scale must be finite, got ", options.grad_scale));
    }
    in_step_ = true;
    grad_scale_ = options.grad_scale;
    if (release_mirror_) {  // the checkpoint that needed it is written
      mirror_->Release();
      release_mirror_ = false;
    }
    ready_.Reset();
    overlapped_ = false;
    if (initialised_ && learning_rate_ != nullptr) {
      pushed_lr_ = learning_rate_(next_step_);
      overlapped_ = std::isfinite(pushed_lr_);  // NaN: not known yet
    }
    if (overlapped_) {
      absl::Status s = remote_->BeginPushes(Header(next_step_, pushed_lr_));
      if (!s.ok()) return Fail(s);
    }
    return absl::OkStatus();
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override {
    ready_.Add(lo, hi, [this](int c) {
      if (overlapped_) remote_->Push(c, grads_ + remote_->layout().chunk(c).lo);
    });
  }

  absl::Status FinishStep(const optim::StepContext& ctx) override {
    RETURN_IF_ERROR(CheckUsable("FinishStep"));
    if (!in_step_) return absl::FailedPreconditionError("ps sync: FinishStep without BeginStep");
    in_step_ = false;
    const auto start = std::chrono::steady_clock::now();
    if (ctx.step < 1 || !std::isfinite(ctx.lr)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("ps sync: bad step context (step ", ctx.step, ", lr ", ctx.lr, ")")));
    }
    if (ctx.grad_scale != 1.0f) {
      return Fail(absl::UnimplementedError(
          "ps sync: a step-context grad_scale (loss scaling) is not supported"));
    }
    if (!ready_.complete()) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "ps sync: backward reported ", ready_.ready(), " of ", ready_.size(),
          " chunks completely at step ", ctx.step, " (ranges missing or repeated)")));
    }
    if (!initialised_) {
      // The first step of the generation: rank 0 hands the servers the
      // parameters every rank holds now; nobody pushes before they have them.
      if (world_->rank() == 0) {
        std::vector<std::pair<std::string, const float*>> state;
        if (send_state_) {
          for (size_t i = 0; i < mirror_->names().size(); ++i) {
            state.push_back({mirror_->names()[i], mirror_->buffer(i)});
          }
        }
        absl::Status s = remote_->InitServers(ctx.step - 1, optimizer_config_, params_, state);
        send_state_ = false;
        mirror_->Release();
        if (!s.ok()) return Fail(s);
      }
      absl::Status s = world_->Barrier();
      if (!s.ok()) return Fail(s);
      initialised_ = true;
      next_step_ = ctx.step;
    }
    if (ctx.step != next_step_) {
      return Fail(absl::FailedPreconditionError(absl::StrCat(
          "ps sync: FinishStep for step ", ctx.step, " but this generation's next step is ",
          next_step_)));
    }
    if (overlapped_) {
      if (ctx.lr != pushed_lr_) {
        remote_->ClosePushes();
        (void)remote_->WaitPushes();
        return Fail(absl::FailedPreconditionError(absl::StrCat(
            "ps sync: the learning rate of step ", ctx.step, " is ", ctx.lr,
            " but the schedule in SyncEnv gave ", pushed_lr_, " (pushed with the gradients)")));
      }
    } else {
      absl::Status s = remote_->BeginPushes(Header(ctx.step, ctx.lr));
      if (!s.ok()) return Fail(s);
      for (int c = 0; c < remote_->layout().num_chunks(); ++c) {
        remote_->Push(c, grads_ + remote_->layout().chunk(c).lo);
      }
    }
    remote_->ClosePushes();
    for (int c = 0; c < remote_->layout().num_chunks(); ++c) remote_->Pull(c, ctx.step, params_);
    absl::Status pushed = remote_->WaitPushes();
    absl::Status pulled = remote_->WaitAllPulls();
    if (!pushed.ok()) return Fail(pushed);
    if (!pulled.ok()) return Fail(pulled);
    ++next_step_;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    absl::MutexLock lock(&mu_);
    ++steps_;
    wait_seconds_ += seconds;
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
  shard::PushHeader Header(int64_t step, float lr) const {
    shard::PushHeader h;
    h.generation = generation_;
    h.step = step;
    h.rank = world_->rank();
    h.weight = 1;
    h.learning_rate = lr;
    h.grad_scale = grad_scale_;
    return h;
  }

  absl::Status CheckUsable(const char* call) const {
    if (broken_.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "ps sync: ", call, " after an earlier error (", broken_.message(),
        "); destroy this sync and re-join"));
  }
  absl::Status Fail(absl::Status s) {
    broken_ = absl::Status(s.code(), absl::StrCat("ps sync, rank ", world_->rank(), ": ",
                                                  s.message()));
    return broken_;
  }

  const int64_t generation_;
  Communicator* const world_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const std::function<float(int64_t)> learning_rate_;
  const std::unique_ptr<shard::RemoteShards> remote_;
  const v1::OptimizerConfig optimizer_config_;
  const std::unique_ptr<OptimizerMirror> mirror_;
  ChunkReadiness ready_;  // backward thread during a step, trainer otherwise

  bool in_step_ = false;
  bool initialised_ = false;
  bool send_state_ = false;      // rank 0: mirror_ holds restored state for the servers
  bool release_mirror_ = false;  // rank 0: mirror_ was filled for a checkpoint
  bool overlapped_ = false;
  int64_t next_step_ = 0;
  float pushed_lr_ = 0;
  float grad_scale_ = 1;
  absl::Status broken_;

  mutable absl::Mutex mu_;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> CreatePsSync(const SyncOptions& options,
                                                          SyncEnv env) {
  RETURN_IF_ERROR(ValidateRemoteSyncOptions(options));
  ASSIGN_OR_RETURN(RemoteSyncKnobs knobs, ParseRemoteSyncKnobs(options));
  const ShardServerEnv& servers = env.shard_servers;
  if (servers.addresses.empty()) {
    return absl::InvalidArgumentError(
        "--sync ps needs shard servers: give the worker --shard_servers host:port,... (or run "
        "tandem local --shard_servers N)");
  }
  if (servers.generation < 1) {
    return absl::InvalidArgumentError("ps sync: SyncEnv.shard_servers.generation must be >= 1");
  }
  if (env.size > 0 && (env.params == nullptr || env.grads == nullptr)) {
    return absl::InvalidArgumentError("ps sync: params and grads are required");
  }
  // The servers run the optimizer the trainer asked for: describe it.
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> probe, env.make_optimizer({0, 0}));
  ASSIGN_OR_RETURN(v1::OptimizerConfig config, shard::DescribeOptimizer(*probe));
  if (env.make_device_stepper) {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceStepper> d, env.make_device_stepper(probe.get()));
    if (d != nullptr) {
      return absl::UnimplementedError(
          "ps sync: device memory is not supported yet (ps runs on the CPU backend)");
    }
  }
  shard::RemoteShardsOptions ro;
  ro.addresses = servers.addresses;
  ro.job_id = servers.job_id;
  ro.generation = servers.generation;
  ro.rank = env.comms->world->rank();
  ro.world_size = env.comms->world->world_size();
  ro.size = env.size;
  ro.chunk_elements = shard::ShardLayout::ChunkElementsForMb(knobs.chunk_mb);
  ro.streams_per_server = knobs.streams;
  ro.timeout = knobs.timeout;
  ro.apply_per_chunk = knobs.apply_per_chunk;
  ASSIGN_OR_RETURN(std::unique_ptr<shard::RemoteShards> remote, shard::RemoteShards::Create(ro));
  auto mirror = std::make_unique<OptimizerMirror>(*probe, env.size);
  auto sync = std::make_unique<PsSyncImpl>(std::move(env), std::move(remote), std::move(config),
                                           std::move(mirror));
  return std::unique_ptr<GradientSync>(std::move(sync));
}

}  // namespace sync
}  // namespace tandem
