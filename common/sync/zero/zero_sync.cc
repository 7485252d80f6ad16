#include "common/sync/zero/zero_sync.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/bucket/bucket_engine.h"
#include "common/sync/bucket/comm_executor.h"
#include "common/sync/grad_clip.h"
#include "common/sync/step_guard.h"
#include "common/sync/zero/layer_gather.h"
#include "common/sync/zero/one_node_pieces.h"
#include "common/sync/zero/two_level_allgather.h"
#include "common/sync/zero/zero_parts.h"
#include "common/tensor/param_hook.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {
namespace {

int64_t CapFloats(double bucket_cap_mb) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(bucket_cap_mb * 1024 * 1024 / 4, 1e15)));
}

// One layer of the overlapped parameter gather after step `step`.
struct GatherOp {
  int64_t round = 0;
  int64_t step = 0;
};

class ZeroSyncImpl final : public ZeroSync, public tensor::ParamHook {
 public:
  ZeroSyncImpl(const ZeroSyncOptions& o, std::unique_ptr<optim::Optimizer> optimizer,
               std::unique_ptr<optim::DeviceStepper> stepper, GradClip clip)
      : stage_(o.stage),
        label_(o.stage == ZeroStage::kOptimizer ? "zero1 sync" : "zero2 sync"),
        comm_(o.comm),
        params_(o.params),
        grads_(o.grads),
        size_(o.size),
        world_(o.comm->world_size()),
        rank_(o.comm->rank()),
        map_(o.size, o.comm->world_size()),
        owned_(map_.owned(o.comm->rank())),
        optimizer_(std::move(optimizer)),
        stepper_(std::move(stepper)),
        device_(stepper_ != nullptr),
        in_place_(o.stage == ZeroStage::kOptimizer || device_),
        host_comm_(o.host_comm),
        clip_(std::move(clip)),
        ready_ranges_(o.ready_ranges),
        layer_ranges_(o.layer_ranges),
        one_node_(!device_ && OneNodePieces::Usable(o.comm)),
        overlap_(!device_ && !one_node_ && o.overlap_allgather && !o.layer_ranges.empty() &&
                 o.comm->world_size() > 1),
        gather_group_mb_(o.gather_group_mb),
        two_level_(o.groups, o.comm->world_size()),
        round_route_(RoundGatherRoute(world_, o.groups == nullptr ? 1 : o.groups->num_nodes,
                                      two_level_.usable())) {}

  // gatherer_, the last member, stops first (after the collective in
  // flight, if any).
  ~ZeroSyncImpl() override = default;

  // Rank 0 says which route the step takes (device, one node, two levels).
  void LogRoute(const ZeroSyncOptions& o) const {
    if (device_ && rank_ == 0) {
      LOG(INFO) << label_ << ": device memory: buckets allreduced in place"
                << (stage_ == ZeroStage::kGradients
                        ? " (zero2 takes zero1's path on device: no reduce-scatter, gradient "
                          "memory not reduced)"
                        : "")
                << ", owned slice stepped on the device, slices gathered in place";
      if (o.overlap_allgather && !o.layer_ranges.empty() && world_ > 1) {
        LOG(INFO) << label_ << ": overlap=1 is host-only; gathering at the end of each step";
      }
    }
    if (one_node_ && rank_ == 0) {
      LOG(INFO) << label_ << ": one node over shared memory: gradients reduce-scattered and "
                << "slices gathered where they lie (one collective each per bucket / step)"
                << (o.overlap_allgather ? "; overlap=1 does not apply (gathered at the end of "
                                          "each step)"
                                        : "");
    }
    if (!device_ && !one_node_ && rank_ == 0 && round_route_ == GatherRoute::kTwoLevel) {
      LOG(INFO) << label_ << ": parameter gather rounds in two levels (" << o.groups->num_nodes
                << " nodes of " << world_ / o.groups->num_nodes
                << " ranks: an allgather across nodes, then one inside each node)";
    }
  }

  absl::Status CheckLayersTile() const {
    // Forward order need not be address order; together they must tile
    // [0, size) so that gathering every layer gathers everything.
    std::vector<std::pair<int64_t, int64_t>> sorted = layer_ranges_;
    std::sort(sorted.begin(), sorted.end());
    int64_t next = 0;
    for (const auto& [lo, hi] : sorted) {
      if (lo != next || hi < lo) {
        return absl::InvalidArgumentError(absl::StrCat(
            label_, ": layer_ranges must tile [0, ", size_, "); [", lo, ", ", hi,
            ") leaves a gap or overlap at ", next));
      }
      next = hi;
    }
    if (next != size_) {
      return absl::InvalidArgumentError(absl::StrCat(label_, ": layer_ranges end at ", next,
                                                     ", not at the size ", size_));
    }
    return absl::OkStatus();
  }

  absl::Status Start(const ZeroSyncOptions& o) {
    LogRoute(o);
    if (overlap_) RETURN_IF_ERROR(CheckLayersTile());
    // Allgather rounds: `chunk_` floats of every shard per round (overlap:
    // gather_group_mb per round over all shards, so each collective is
    // large enough and there are several rounds to overlap).
    const double round_mb = overlap_ ? gather_group_mb_ : o.bucket_cap_mb;
    chunk_ = std::max<int64_t>(1, std::min(map_.shard_size(), CapFloats(round_mb) / world_));
    // Device, or one node: gathered in place, no staging.
    if (map_.shard_size() == 0 || device_ || one_node_) chunk_ = 0;
    if (one_node_) gather_pieces_ = OneNodePieces::Create(comm_, map_);
    rounds_ = chunk_ == 0 ? 0 : (map_.shard_size() + chunk_ - 1) / chunk_;
    gather_out_.assign(chunk_ * world_, 0.f);
    if (!in_place_) grad_shard_.assign(map_.shard_size(), 0.f);
    shard_ = {label_, rank_, world_, &clip_, owned_, &ready_ranges_,
              in_place_ ? grads_ + owned_.lo : grad_shard_.data(), params_,
              optimizer_.get(), stepper_.get()};

    BucketEngineOptions e;
    e.ready_ranges = o.ready_ranges;
    e.size = o.size;
    e.bucket_cap_mb = o.bucket_cap_mb;
    e.label = label_;
    e.operation_name = in_place_ ? "allreduce" : "reduce to owners";
    e.rank = rank_;
    if (in_place_) {
      e.operation = [this](int, int64_t lo, int64_t hi) {
        RETURN_IF_ERROR(comm_->AllReduce(grads_ + lo, hi - lo, ReduceOp::kSum));
        AddBytes((hi - lo) * int64_t{sizeof(float)});
        return absl::OkStatus();
      };
    } else {
      e.operation = [this](int b, int64_t lo, int64_t hi) { return ReduceToOwners(b, lo, hi); };
    }
    ASSIGN_OR_RETURN(engine_, BucketEngine::Create(std::move(e)));
    if (overlap_) {
      gatherer_ = std::make_unique<CommExecutor<GatherOp>>(
          std::max<int64_t>(1, rounds_),
          [this](const GatherOp& op) { return RunGather(op); });
    }
    if (!in_place_) {
      // Routes and staging, sized once from the plan; the communication
      // thread uses them only once a step is open.
      owner_reduce_ = std::make_unique<OwnerReduce>(map_, rank_, engine_->plan().buckets, comm_);
    }
    return absl::OkStatus();
  }

  std::string name() const override {
    return stage_ == ZeroStage::kOptimizer ? "zero1" : "zero2";
  }
  optim::ParamRange owned_range() const override { return owned_; }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }
  const shard::ZeroShardMap& shard_map() const override { return map_; }

  ZeroMemory memory() const override {
    ZeroMemory m;
    m.param_bytes = size_ * int64_t{sizeof(float)};
    m.grad_bytes = (in_place_ ? size_ : static_cast<int64_t>(grad_shard_.size())) *
                   int64_t{sizeof(float)};
    m.optimizer_bytes = optimizer_->state_bytes();
    m.staging_bytes = static_cast<int64_t>(gather_out_.size() +
                                           (owner_reduce_ ? owner_reduce_->staging_floats() : 0)) *
                      int64_t{sizeof(float)};
    return m;
  }

  tensor::ParamHook* param_hook() override { return overlap_ ? this : nullptr; }

  // ParamHook (trainer thread): [lo, hi) holds the step's parameters once
  // every layer it touches has been gathered.
  absl::Status Gather(int64_t lo, int64_t hi, tensor::ParamPass) override {
    if (!overlap_) return absl::OkStatus();
    if (lo < 0 || hi > size_ || lo > hi) {
      return absl::InvalidArgumentError(absl::StrCat(label_, ": parameter range [", lo, ", ", hi,
                                                     ") is outside [0, ", size_, ")"));
    }
    // Round k brings floats [k C, (k + 1) C) of every shard: [lo, hi) is in
    // once the rounds reaching the end of each of its pieces are.
    int64_t need = 0;
    for (int j = 0; j < world_ && lo < hi; ++j) {
      const optim::ParamRange p = map_.piece(j, lo, hi);
      if (p.size() == 0) continue;
      const int64_t end = p.hi - int64_t{j} * map_.shard_size();  // offset in shard j
      need = std::max(need, (end + chunk_ - 1) / chunk_);
    }
    return WaitForLayers(need);
  }
  void Release(int64_t, int64_t, tensor::ParamPass) override {}

  absl::Status SyncStateToHost() override {
    RETURN_IF_ERROR(WaitForLayers(kAllLayers));
    return device_ ? stepper_->SaveState() : absl::OkStatus();
  }
  absl::Status StateLoaded() override {
    RETURN_IF_ERROR(WaitForLayers(kAllLayers));
    return device_ ? stepper_->LoadState() : absl::OkStatus();
  }

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(WaitForLayers(kAllLayers));
    RETURN_IF_ERROR(guard_.CheckBegin(options));
    if (device_ && world_ > 1 && host_comm_ == nullptr &&
        (options.skip_non_finite || options.measure_grad_norm)) {
      return absl::FailedPreconditionError(absl::StrCat(
          label_, ": skip_non_finite / measure_grad_norm in device memory need host_comm (a "
                  "host-memory communicator over the same ranks)"));
    }
    report_ = StepReport{};
    return guard_.Started(engine_->BeginStep(), options);
  }

  StepReport last_step() const override { return report_; }

  void OnGradientsReady(int64_t lo, int64_t hi) override { engine_->OnGradientsReady(lo, hi); }

  absl::Status FinishStep(const optim::StepContext& context) override {
    RETURN_IF_ERROR(guard_.CheckFinish());
    RETURN_IF_ERROR(guard_.Record(engine_->FinishStep()));
    const int64_t step = engine_->stats().steps;
    absl::Status s = Update(context, step);
    if (s.ok() && report_.applied && !overlap_) {
      s = device_ ? GatherOnDevice(step) : AllGatherParams(step);
    }
    RETURN_IF_ERROR(guard_.Record(s));
    {
      absl::MutexLock lock(&mu_);
      ++steps_;
    }
    if (overlap_ && report_.applied) {
      // The gather thread brings the other slices in, layer by layer in
      // forward order, while the trainer moves on to the next forward. The
      // ring holds one step's layers and the last step's were waited for
      // in BeginStep, so Enqueue does not wait.
      for (int64_t k = 0; k < rounds_; ++k) {
        const int64_t ticket = gatherer_->Enqueue({k, step});
        if (k == 0) gather_first_ticket_ = ticket;
      }
    }
    return absl::OkStatus();
  }

  SyncStats stats() const override {
    const BucketEngineStats e = engine_->stats();
    SyncStats s;
    s.buckets = e.buckets;
    s.comm_seconds = e.busy_seconds;
    s.exposed_wait_seconds = e.exposed_wait_seconds;
    absl::MutexLock lock(&mu_);
    s.steps = steps_;
    s.bytes_sent = bytes_sent_;
    s.buckets += gather_rounds_;
    s.comm_seconds += gather_seconds_;
    // Without overlap the allgather is all on the trainer thread; with it,
    // only the time the trainer waited for a layer.
    s.exposed_wait_seconds += overlap_ ? gather_wait_seconds_ : gather_seconds_;
    s.optimizer_seconds = optimizer_seconds_;
    return s;
  }

 private:
  void AddBytes(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    bytes_sent_ += bytes;
  }

  // zero2's bucket operation (communication thread).
  absl::Status ReduceToOwners(int bucket, int64_t lo, int64_t hi) {
    int64_t bytes = 0;
    RETURN_IF_ERROR(
        owner_reduce_->Run(*comm_, grads_, bucket, lo, hi, grad_shard_.data(), &bytes));
    AddBytes(bytes);
    return absl::OkStatus();
  }

  // Every rank holds the reduced gradients of its own shard; the clip
  // factor is the same float everywhere (GradClip sums the shards' squares
  // in rank order).
  absl::Status Update(const optim::StepContext& context, int64_t step) {
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s =
        StepOwnedShard(shard_, context, step, guard_.grad_scale(), guard_.options(), &report_);
    absl::MutexLock lock(&mu_);
    optimizer_seconds_ += SecondsSince(start);
    return s;
  }

  static constexpr int64_t kAllLayers = std::numeric_limits<int64_t>::max();

  // Trainer thread: blocks until the pending gather has brought in its
  // first `layers` layers (kAllLayers: until it is over). The gather's
  // error, if it failed (sticky).
  absl::Status WaitForLayers(int64_t layers) {
    if (!overlap_) return absl::OkStatus();
    if (gather_first_ticket_ < 0) return gatherer_->Drain();  // none pending: at once
    const int64_t n = rounds_;
    const int64_t last = gather_first_ticket_ + std::min(layers, n) - 1;
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = gatherer_->Wait(last);
    const double seconds = SecondsSince(start);
    // kAllLayers: the gather is over; only then may FinishStep queue the
    // next one.
    if (layers >= n) gather_first_ticket_ = -1;
    absl::MutexLock lock(&mu_);
    gather_wait_seconds_ += seconds;
    return s;
  }

  // Gather thread: one layer of the step FinishStep queued.
  absl::Status RunGather(const GatherOp& op) {
    const auto start = std::chrono::steady_clock::now();
    int64_t bytes = 0;
    absl::Status s = GatherRound(op.round * chunk_, op.step, &bytes);
    absl::MutexLock lock(&mu_);
    gather_seconds_ += SecondsSince(start);
    ++gather_rounds_;
    bytes_sent_ += bytes;
    return s;
  }

  // Device memory: the slices in place over the world communicator.
  absl::Status GatherOnDevice(int64_t step) {
    if (world_ == 1) return absl::OkStatus();
    const auto start = std::chrono::steady_clock::now();
    int64_t bytes = 0;
    absl::Status s = GatherOwnedSlices(*comm_, map_, params_, &bytes);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(label_, ": parameter gather at step ", step,
                                                 " on rank ", rank_, " failed: ", s.message()));
    }
    absl::MutexLock lock(&mu_);
    gather_seconds_ += SecondsSince(start);
    ++gather_rounds_;
    bytes_sent_ += bytes;
    return absl::OkStatus();
  }

  // The whole allgather at the end of FinishStep, round by round.
  // One node: one gather of the slices where they lie.
  absl::Status AllGatherParams(int64_t step) {
    if (world_ == 1 || (chunk_ == 0 && gather_pieces_ == nullptr)) return absl::OkStatus();
    const auto start = std::chrono::steady_clock::now();
    int64_t bytes = 0;
    if (gather_pieces_ != nullptr) {
      absl::Status s = gather_pieces_->Gather(params_, 0, size_, &bytes);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat(label_, ": ", s.message(), " at step ", step,
                                                   " on rank ", rank_));
      }
    }
    for (int64_t off = 0; chunk_ > 0 && off < map_.shard_size(); off += chunk_) {
      RETURN_IF_ERROR(GatherRound(off, step, &bytes));
    }
    absl::MutexLock lock(&mu_);
    gather_seconds_ += SecondsSince(start);
    gather_rounds_ += gather_pieces_ != nullptr ? 1 : rounds_;
    bytes_sent_ += bytes;
    return absl::OkStatus();
  }

  // One round: floats [off, off + C) of every padded shard, by one ring
  // allgather (balanced: every rank sends the same C floats, so no link
  // carries more than the ring's (N - 1) / N share), or at equal nodes of
  // several ranks by the two-level allgather (two collectives). This rank's
  // chunk is staged at its block of gather_out_ (zeros past the real
  // elements), gathered in place, and the others' real parts copied out.
  absl::Status GatherRound(int64_t off, int64_t step, int64_t* bytes) {
    const int64_t S = map_.shard_size();
    const int64_t c = std::min(chunk_, S - off);
    const bool two_level = round_route_ == GatherRoute::kTwoLevel;
    auto block = [&](int j) { return gather_out_.data() + (two_level ? two_level_.slot(j) : j) * c; };
    float* mine = block(rank_);
    const int64_t first = int64_t{rank_} * S + off;
    const int64_t real = std::clamp<int64_t>(size_ - first, 0, c);
    if (real > 0) std::memcpy(mine, params_ + first, real * sizeof(float));
    std::fill(mine + real, mine + c, 0.f);
    absl::Status s = two_level ? two_level_.Run(gather_out_.data(), c)
                               : comm_->AllGather(mine, gather_out_.data(), c * int64_t{sizeof(float)});
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(label_, ": parameter ",
                                                 two_level ? "two-level " : "", "allgather (floats ",
                                                 off, "..", off + c, " of each shard of ", S,
                                                 ") at step ", step, " on rank ", rank_,
                                                 " failed: ", s.message()));
    }
    for (int j = 0; j < world_; ++j) {
      if (j == rank_) continue;
      const int64_t dst = int64_t{j} * S + off;
      const int64_t got = std::min<int64_t>(c, size_ - dst);
      if (got > 0) std::memcpy(params_ + dst, block(j), got * sizeof(float));
    }
    *bytes += c * int64_t{sizeof(float)};
    return absl::OkStatus();
  }

  const ZeroStage stage_;
  const std::string label_;
  Communicator* const comm_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const int world_;
  const int rank_;
  const shard::ZeroShardMap map_;
  const optim::ParamRange owned_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const std::unique_ptr<optim::DeviceStepper> stepper_;  // device memory; else null
  const bool device_;
  const bool in_place_;  // buckets allreduced in place (zero1, or device)
  Communicator* const host_comm_;  // device: may be null
  GradClip clip_;
  const std::vector<std::pair<int64_t, int64_t>> ready_ranges_;
  const std::vector<std::pair<int64_t, int64_t>> layer_ranges_;
  const bool one_node_;  // host memory over shm: OneNodePieces
  const bool overlap_;
  const double gather_group_mb_;  // overlap: MiB per gather round
  TwoLevelAllGather two_level_;    // usable at equal nodes
  const GatherRoute round_route_;  // kAllGather (flat ring) or kTwoLevel
  OwnedShard shard_;          // set in Start

  // Sized in Start, never resized.
  int64_t chunk_ = 0;
  int64_t rounds_ = 0;             // ceil(S / chunk_)
  std::vector<float> gather_out_;  // chunk_ * world
  std::vector<float> grad_shard_;  // zero2: S, the reduced gradients of owned_ (+ padding)
  std::unique_ptr<OwnerReduce> owner_reduce_;  // zero2
  std::unique_ptr<OneNodePieces> gather_pieces_;  // one node; else null

  // Trainer thread only.
  StepGuard guard_{label_};
  StepReport report_;

  mutable absl::Mutex mu_;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t gather_rounds_ ABSL_GUARDED_BY(mu_) = 0;
  double gather_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double optimizer_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double gather_wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;  // the trainer's, overlapped
  // Trainer thread: the pending overlapped gather's first ticket (-1: none).
  int64_t gather_first_ticket_ = -1;

  std::unique_ptr<BucketEngine> engine_;  // its thread calls into the members above
  // Last: the overlapped gather's thread (overlap only, set in Start), one
  // op per layer; it runs RunGather over the members above.
  std::unique_ptr<CommExecutor<GatherOp>> gatherer_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ZeroSync>> CreateZeroSync(ZeroSyncOptions options) {
  const char* label = options.stage == ZeroStage::kOptimizer ? "zero1 sync" : "zero2 sync";
  if (options.stage != ZeroStage::kOptimizer && options.stage != ZeroStage::kGradients) {
    return absl::InvalidArgumentError("zero sync: stage must be 1 or 2");
  }
  ZeroPartsOptions po;
  po.label = label;
  po.comm = options.comm;
  po.size = options.size;
  po.params = options.params;
  po.grads = options.grads;
  po.max_grad_norm = options.max_grad_norm;
  po.make_optimizer = options.make_optimizer;
  po.make_device_stepper = options.make_device_stepper;
  po.allow_device = true;
  po.host_comm = options.host_comm;
  ASSIGN_OR_RETURN(ZeroParts parts, MakeZeroParts(po));
  auto sync = std::make_unique<ZeroSyncImpl>(options, std::move(parts.optimizer),
                                             std::move(parts.stepper), std::move(parts.clip));
  RETURN_IF_ERROR(sync->Start(options));
  return std::unique_ptr<ZeroSync>(std::move(sync));
}

std::vector<OptionInfo> ZeroOptionInfo() {
  return {{"bucket_cap_mb", "25", "MiB per gradient bucket and per allgather round"},
          {"overlap", "1",
           "1 = the updated slices are gathered layer by layer during the next forward, 0 = one "
           "chunked allgather at the end of the step"},
          {"gather_mb", "1",
           "overlap=1: MiB of parameters per gather round (one ring allgather of an equal part "
           "of every shard)"}};
}

absl::Status ValidateZeroOptions(const SyncOptions& options) {
  ASSIGN_OR_RETURN(const int64_t overlap, GetSyncOptInt(options, "overlap", 1));
  if (overlap != 0 && overlap != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "overlap must be 1 (gather during the next forward) or 0 (allgather at the end of the "
        "step), got ", overlap));
  }
  ASSIGN_OR_RETURN(const double gather_mb, GetSyncOptDouble(options, "gather_mb", 1));
  if (!(gather_mb > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gather_mb must be > 0 (MiB per gather round), got ", gather_mb));
  }
  return absl::OkStatus();
}

bool ZeroUsesNodeGroups(const SyncOptions&) { return true; }

absl::StatusOr<std::unique_ptr<GradientSync>> CreateZeroSyncForRegistry(
    ZeroStage stage, const SyncOptions& options, SyncEnv env) {
  ZeroSyncOptions o;
  o.stage = stage;
  o.comm = env.comms->world.get();
  o.groups = env.comms;
  o.params = env.params;
  o.grads = env.grads;
  o.size = env.size;
  o.ready_ranges = std::move(env.ready_ranges);
  o.layer_ranges = std::move(env.layer_ranges);
  o.bucket_cap_mb = options.bucket_cap_mb;
  o.max_grad_norm = options.max_grad_norm;
  ASSIGN_OR_RETURN(const int64_t overlap, GetSyncOptInt(options, "overlap", 1));
  o.overlap_allgather = overlap == 1;
  ASSIGN_OR_RETURN(o.gather_group_mb, GetSyncOptDouble(options, "gather_mb", 1));
  o.make_optimizer = std::move(env.make_optimizer);
  o.make_device_stepper = std::move(env.make_device_stepper);
  o.host_comm = env.host_comm;
  absl::StatusOr<std::unique_ptr<ZeroSync>> s = CreateZeroSync(std::move(o));
  if (!s.ok()) return s.status();
  return std::unique_ptr<GradientSync>(std::move(*s));
}

}  // namespace sync
}  // namespace tandem
