#include "common/sync/zero/zero3_sync.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status/status_macros.h"
#include "common/sync/bucket/bucket_plan.h"
#include "common/sync/bucket/bucket_readiness.h"
#include "common/sync/bucket/comm_executor.h"
#include "common/sync/grad_clip.h"
#include "common/sync/step_guard.h"
#include "common/sync/zero/layer_gather.h"
#include "common/sync/zero/layer_groups.h"
#include "common/sync/zero/zero_parts.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {
namespace {

constexpr char kLabel[] = "zero3 sync";

int64_t PageBytes() {
  static const int64_t page = std::max<long>(4096, sysconf(_SC_PAGESIZE));
  return page;
}

// Gives the pages wholly inside [p, p + count) back to the OS as `how`
// says; their contents are undefined afterwards (zero or stale). Pages
// shared with neighbours stay.
void ReleaseInterior(PageRelease how, float* p, int64_t count) {
  if (how == PageRelease::kKeep || count <= 0) return;
  const uintptr_t page = static_cast<uintptr_t>(PageBytes());
  const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t b = reinterpret_cast<uintptr_t>(p + count) / page * page;
  if (b <= a) return;
  (void)madvise(reinterpret_cast<void*>(a), b - a,
                how == PageRelease::kLazy ? MADV_FREE : MADV_DONTNEED);
}

// MiB -> floats (at least one).
int64_t MibFloats(double mb) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(mb * 1024 * 1024 / 4, 1e15)));
}
// The allgather route's rounds: gather_mb of staging over all ranks.
int64_t RoundFloats(double gather_mb) { return MibFloats(gather_mb); }

// One collective for the communication thread.
struct Op {
  enum Kind { kGather, kBucket } kind = kGather;
  int64_t lo = 0;
  int64_t hi = 0;
  int bucket = 0;
};

class Zero3SyncImpl final : public Zero3Sync {
 public:
  Zero3SyncImpl(const Zero3SyncOptions& o, std::unique_ptr<optim::Optimizer> optimizer,
                GradClip clip, BucketPlan plan, LayerGroups groups)
      : comm_(o.comm),
        params_(o.params),
        grads_(o.grads),
        size_(o.size),
        world_(o.comm->world_size()),
        rank_(o.comm->rank()),
        map_(o.size, o.comm->world_size()),
        owned_(map_.owned(o.comm->rank())),
        optimizer_(std::move(optimizer)),
        clip_(std::move(clip)),
        ready_ranges_(o.ready_ranges),
        layers_(o.layer_ranges),
        release_(o.release),
        groups_(std::move(groups)),
        gather_(o.comm, o.groups, map_, groups_.ranges(), RoundFloats(o.gather_mb)),
        plan_(std::move(plan)) {}

  // executor_, the last member, stops the communication thread first.
  ~Zero3SyncImpl() override = default;

  // Sizes everything once, returns the non-owned parameter pages, starts
  // the communication thread.
  void Start() {
    const int nb = static_cast<int>(plan_.buckets.size());
    grad_shard_.assign(map_.shard_size(), 0.f);
    shard_ = {kLabel, rank_, world_, &clip_, owned_, &ready_ranges_, grad_shard_.data(), params_,
              optimizer_.get()};
    owner_reduce_ = std::make_unique<OwnerReduce>(map_, rank_, plan_.buckets, comm_);
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_by_lo_.push_back({layers_[i].first, static_cast<int>(i)});
    }
    for (const LayerGroup& g : groups_.groups) non_owned_.push_back(NonOwned(g.lo, g.hi));
    std::sort(layers_by_lo_.begin(), layers_by_lo_.end());
    group_ticket_.assign(groups_.groups.size(), -1);
    ReleaseParams(0, size_);
    // At most every bucket plus a gather and a prefetch are ever queued.
    executor_ = std::make_unique<CommExecutor<Op>>(
        nb + 2 * static_cast<int64_t>(layers_.size()) + 8,
        [this](const Op& op) { return RunOp(op); });
  }

  std::string name() const override { return "zero3"; }
  optim::ParamRange owned_range() const override { return owned_; }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }
  const shard::ZeroShardMap& shard_map() const override { return map_; }
  tensor::ParamHook* param_hook() override { return this; }

  int64_t held_param_floats() const override {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  int64_t peak_held_param_floats() const override {
    absl::MutexLock lock(&mu_);
    return peak_;
  }

  int64_t resident_param_bytes() const override {
    if (size_ == 0) return 0;
    const uintptr_t page = static_cast<uintptr_t>(PageBytes());
    const uintptr_t a = reinterpret_cast<uintptr_t>(params_) / page * page;
    const uintptr_t b = (reinterpret_cast<uintptr_t>(params_ + size_) + page - 1) / page * page;
    std::vector<unsigned char> v((b - a) / page);
    if (mincore(reinterpret_cast<void*>(a), b - a, v.data()) != 0) return -1;
    int64_t pages = 0;
    for (unsigned char c : v) pages += c & 1;
    return pages * static_cast<int64_t>(page);
  }

  SyncMemory memory() const override {
    SyncMemory m;
    {
      absl::MutexLock lock(&mu_);
      m.param_bytes = (owned_.size() + peak_) * int64_t{sizeof(float)};
    }
    m.grad_bytes = static_cast<int64_t>(grad_shard_.size()) * int64_t{sizeof(float)};
    m.optimizer_bytes = optimizer_->state_bytes();
    m.staging_bytes =
        (owner_reduce_->staging_floats() + gather_.staging_floats()) * int64_t{sizeof(float)};
    return m;
  }

  // ---- The parameter hook (trainer thread) ----

  absl::Status Gather(int64_t lo, int64_t hi, tensor::ParamPass pass) override {
    RETURN_IF_ERROR(guard_.CheckUsable("Gather"));
    if (lo < 0 || hi > size_ || lo > hi) {
      return absl::InvalidArgumentError(absl::StrCat(kLabel, ": Gather of [", lo, ", ", hi,
                                                     ") outside the parameters [0, ", size_,
                                                     ")"));
    }
    const int i = FindLayer(lo, hi);
    const int g = i < 0 ? -1 : groups_.group_of_layer[i];
    if (kept_ >= 0 && kept_ != g) {
      FreeGroup(kept_);
      kept_ = -1;
    }
    // Not a layer: synchronous, no prefetch. Groups held now are dropped
    // first, since the caller's Release frees their pages too.
    if (g < 0) {
      RETURN_IF_ERROR(guard_.Record(Drain()));
      FreeAll();
      const int64_t t = Enqueue({Op::kGather, lo, hi, 0});
      AddHeld(NonOwned(lo, hi));
      return guard_.Record(Wait(t));
    }
    QueueGroup(g);
    RETURN_IF_ERROR(guard_.Record(Wait(group_ticket_[g])));
    // The next group in this pass comes in while this one computes.
    const int next = pass == tensor::ParamPass::kForward ? g + 1 : g - 1;
    if (next >= 0 && next < static_cast<int>(groups_.groups.size())) QueueGroup(next);
    return absl::OkStatus();
  }

  void Release(int64_t lo, int64_t hi, tensor::ParamPass pass) override {
    if (lo < 0 || hi > size_ || lo > hi) return;
    const int i = FindLayer(lo, hi);
    if (i < 0) {
      AddHeld(-NonOwned(lo, hi));
      ReleaseParams(lo, hi);
      return;
    }
    const int g = groups_.group_of_layer[i];
    if (group_ticket_[g] < 0) return;
    const LayerGroup& group = groups_.groups[g];
    // A group is done after its last layer in this pass (its first one in
    // backward); backward starts with the group forward ended with: keep it.
    if (pass == tensor::ParamPass::kForward) {
      if (i != group.last) return;
      if (g + 1 == static_cast<int>(groups_.groups.size())) {
        kept_ = g;
        return;
      }
    } else if (i != group.first) {
      return;
    }
    if (kept_ == g) kept_ = -1;
    FreeGroup(g);
  }

  // ---- The step (trainer thread) ----

  absl::Status BeforeForward() override {
    RETURN_IF_ERROR(guard_.CheckUsable("BeforeForward"));
    RETURN_IF_ERROR(guard_.Record(Drain()));
    FreeAll();
    absl::MutexLock lock(&mu_);
    peak_ = held_;
    return absl::OkStatus();
  }

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(guard_.CheckBegin(options));
    report_ = StepReport{};
    readiness_.Reset();
    range_error_ = absl::OkStatus();
    in_step_ = true;
    return guard_.Started(absl::OkStatus(), options);
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override {
    if (!range_error_.ok()) return;
    const int64_t step = CurrentStep();
    if (!in_step_) {
      range_error_ = absl::FailedPreconditionError(absl::StrCat(
          kLabel, ": gradients [", lo, ", ", hi, ") reported outside a step on rank ", rank_));
      return;
    }
    // Plan order on every rank, whatever order ranges come in.
    const BucketReadiness::Outcome outcome = readiness_.Report(lo, hi, [this](int bucket) {
      const Bucket& b = plan_.buckets[bucket];
      Enqueue({Op::kBucket, b.lo, b.hi, bucket});
    });
    if (outcome != BucketReadiness::Outcome::kCounted) {
      range_error_ = absl::InvalidArgumentError(absl::StrCat(
          kLabel, ": gradients [", lo, ", ", hi, ") at step ", step, " on rank ", rank_,
          outcome == BucketReadiness::Outcome::kUnknownRange ? " are not one of the ready ranges"
                                                             : " were reported twice"));
    }
  }

  absl::Status FinishStep(const optim::StepContext& context) override {
    RETURN_IF_ERROR(guard_.CheckFinish());
    in_step_ = false;
    const int64_t step = CurrentStep();
    absl::Status s = range_error_;
    if (s.ok() && readiness_.emitted() < readiness_.size()) {
      s = absl::FailedPreconditionError(absl::StrCat(
          kLabel, ": FinishStep at step ", step, " on rank ", rank_, " before bucket ",
          readiness_.emitted(), " of ", plan_.buckets.size(),
          " was complete (backward did not report every range)"));
    }
    absl::Status drained = Drain();  // counted as exposed wait by Wait
    if (s.ok()) s = drained;
    FreeAll();
    RETURN_IF_ERROR(guard_.Record(s));
    RETURN_IF_ERROR(guard_.Record(Update(context, step)));
    absl::MutexLock lock(&mu_);
    ++steps_;
    return absl::OkStatus();
  }

  StepReport last_step() const override { return report_; }

  absl::Status SyncStateToHost() override { return guard_.Record(Drain()); }

  // A restore wrote the whole vector: keep the owned slice only.
  absl::Status StateLoaded() override {
    RETURN_IF_ERROR(guard_.Record(Drain()));
    FreeAll();
    ReleaseParams(0, size_);
    return absl::OkStatus();
  }

  SyncStats stats() const override {
    const CommExecutorStats e = executor_ != nullptr ? executor_->stats() : CommExecutorStats{};
    absl::MutexLock lock(&mu_);
    SyncStats s;
    s.steps = steps_;
    s.buckets = e.ran;
    s.bytes_sent = bytes_sent_;
    s.comm_seconds = e.busy_seconds;
    s.exposed_wait_seconds = e.wait_seconds;
    s.optimizer_seconds = optimizer_seconds_;
    return s;
  }

 private:
  int64_t NonOwned(int64_t lo, int64_t hi) const {
    return (hi - lo) - map_.piece(rank_, lo, hi).size();
  }
  int64_t CurrentStep() const {
    absl::MutexLock lock(&mu_);
    return steps_ + 1;
  }

  int FindLayer(int64_t lo, int64_t hi) const {
    auto it = std::lower_bound(layers_by_lo_.begin(), layers_by_lo_.end(),
                               std::make_pair(lo, -1));
    for (; it != layers_by_lo_.end() && it->first == lo; ++it) {
      if (layers_[it->second].second == hi) return it->second;
    }
    return -1;
  }
  // The non-owned parts of params [lo, hi).
  void ReleaseParams(int64_t lo, int64_t hi) {
    const int64_t a = std::min(hi, std::max(lo, owned_.lo));
    ReleaseInterior(release_, params_ + lo, a - lo);
    const int64_t b = std::max(lo, std::min(hi, owned_.hi));
    ReleaseInterior(release_, params_ + b, hi - b);
  }

  void AddHeld(int64_t floats) {
    absl::MutexLock lock(&mu_);
    held_ += floats;
    peak_ = std::max(peak_, held_);
  }

  // Group g's gather, unless it is held (queued or done) already.
  void QueueGroup(int g) {
    if (group_ticket_[g] >= 0) return;
    const LayerGroup& group = groups_.groups[g];
    group_ticket_[g] = Enqueue({Op::kGather, group.lo, group.hi, 0});
    AddHeld(non_owned_[g]);
  }
  // Group g's gather has completed (Wait or Drain came first).
  void FreeGroup(int g) {
    group_ticket_[g] = -1;
    AddHeld(-non_owned_[g]);
    ReleaseParams(groups_.groups[g].lo, groups_.groups[g].hi);
  }
  // After Drain: nothing in flight.
  void FreeAll() {
    for (size_t g = 0; g < groups_.groups.size(); ++g) {
      if (group_ticket_[g] >= 0) FreeGroup(static_cast<int>(g));
    }
    kept_ = -1;
  }

  // ---- The queue ----

  int64_t Enqueue(const Op& op) { return executor_->Enqueue(op); }
  // Waits until op `ticket` ran; the first op error (sticky) if any did.
  absl::Status Wait(int64_t ticket) { return executor_->Wait(ticket); }
  absl::Status Drain() { return executor_->Drain(); }

  // Communication thread: one queued collective.
  absl::Status RunOp(const Op& op) {
    const int64_t step = CurrentStep();
    return op.kind == Op::kGather ? GatherRange(op.lo, op.hi, step)
                                  : ReduceToOwners(op.bucket, op.lo, op.hi, step);
  }

  // Communication thread: [lo, hi) from its owners, in place (layer_gather.h
  // picks the collective: never a one-to-all broadcast per remote rank).
  absl::Status GatherRange(int64_t lo, int64_t hi, int64_t step) {
    int64_t bytes = 0;
    absl::Status s = gather_.Run(params_, lo, hi, &bytes);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(kLabel, ": ", s.message(), " at step ", step,
                                                 " on rank ", rank_));
    }
    absl::MutexLock lock(&mu_);
    bytes_sent_ += bytes;
    return absl::OkStatus();
  }

  // Communication thread: zero2's bucket reduction into grad_shard_, then
  // the bucket's gradient pages go back to the OS (backward rewrites them).
  absl::Status ReduceToOwners(int bucket, int64_t lo, int64_t hi, int64_t step) {
    int64_t bytes = 0;
    absl::Status s = owner_reduce_->Run(*comm_, grads_, bucket, lo, hi, grad_shard_.data(), &bytes);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(kLabel, ": gradient reduction of bucket ",
                                                 bucket, " of ", plan_.buckets.size(), " [", lo,
                                                 ", ", hi, ") at step ", step, " on rank ",
                                                 rank_, " failed: ", s.message()));
    }
    ReleaseInterior(release_, grads_ + lo, hi - lo);
    absl::MutexLock lock(&mu_);
    bytes_sent_ += bytes;
    return absl::OkStatus();
  }

  // As zero2: every rank holds its shard's reduced gradients.
  absl::Status Update(const optim::StepContext& context, int64_t step) {
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s =
        StepOwnedShard(shard_, context, step, guard_.grad_scale(), guard_.options(), &report_);
    absl::MutexLock lock(&mu_);
    optimizer_seconds_ += SecondsSince(start);
    return s;
  }

  Communicator* const comm_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const int world_;
  const int rank_;
  const shard::ZeroShardMap map_;
  const optim::ParamRange owned_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  GradClip clip_;
  const std::vector<std::pair<int64_t, int64_t>> ready_ranges_;
  const std::vector<std::pair<int64_t, int64_t>> layers_;  // forward order
  const PageRelease release_;
  const LayerGroups groups_;  // the gather units: consecutive layers, >= group_mb
  LayerGather gather_;  // communication thread only
  OwnedShard shard_;          // set in Start
  const BucketPlan plan_;

  // Sized in Start, never resized.
  std::vector<float> grad_shard_;  // S: the reduced gradients of owned_ (+ padding)
  std::unique_ptr<OwnerReduce> owner_reduce_;  // communication thread only
  std::vector<std::pair<int64_t, int>> layers_by_lo_;
  std::vector<int64_t> non_owned_;  // per group

  // Trainer thread only.
  StepGuard guard_{kLabel};
  StepReport report_;
  bool in_step_ = false;
  BucketReadiness readiness_ = BucketReadiness::ForPlan(plan_, ready_ranges_);  // queues buckets
  absl::Status range_error_;
  std::vector<int64_t> group_ticket_;  // per group: its gather's ticket, -1 = not held
  int kept_ = -1;  // forward's last group, kept for backward

  mutable absl::Mutex mu_;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  double optimizer_seconds_ ABSL_GUARDED_BY(mu_) = 0;

  // Last: its thread runs RunOp over the members above; set in Start.
  std::unique_ptr<CommExecutor<Op>> executor_;
};

}  // namespace

absl::StatusOr<PageRelease> ParsePageRelease(const std::string& value) {
  if (value == "lazy") return PageRelease::kLazy;
  if (value == "now") return PageRelease::kNow;
  if (value == "keep") return PageRelease::kKeep;
  return absl::InvalidArgumentError(absl::StrCat(
      "release must be lazy (MADV_FREE: pages taken back when the OS needs them), now "
      "(MADV_DONTNEED: resident memory drops at once, each gather re-faults) or keep, got '",
      value, "'"));
}

absl::Status CheckZero3GroupOptions(double group_mb, double gather_mb) {
  if (!(group_mb >= 0) || group_mb > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group_mb must be between 0 (every layer gathered alone) and 1e6 MiB, got ", group_mb));
  }
  if (!(gather_mb > 0) || gather_mb > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gather_mb must be > 0 and at most 1e6 (MiB of staging per allgather round), got ",
        gather_mb));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Zero3Sync>> CreateZero3Sync(Zero3SyncOptions options) {
  ZeroPartsOptions po;
  po.label = kLabel;
  po.comm = options.comm;
  po.size = options.size;
  po.params = options.params;
  po.grads = options.grads;
  po.max_grad_norm = options.max_grad_norm;
  po.make_optimizer = options.make_optimizer;
  po.make_device_stepper = options.make_device_stepper;
  ASSIGN_OR_RETURN(ZeroParts parts, MakeZeroParts(po));
  if (!(options.bucket_cap_mb > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kLabel, ": bucket_cap_mb must be > 0, got ", options.bucket_cap_mb));
  }
  for (const auto& [lo, hi] : options.layer_ranges) {
    if (lo < 0 || hi > options.size || lo > hi) {
      return absl::InvalidArgumentError(absl::StrCat(kLabel, ": layer range [", lo, ", ", hi,
                                                     ") outside the parameters [0, ",
                                                     options.size, ")"));
    }
  }
  if (absl::Status g = CheckZero3GroupOptions(options.group_mb, options.gather_mb); !g.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kLabel, ": ", g.message()));
  }
  // One node has no network link for groups to spare hand-offs on, and
  // groups measured slower there (zero3_sync.h): every layer alone.
  const CommGroups* g = options.groups;
  const bool one_node = g != nullptr && g->num_nodes == 1 &&
                        static_cast<int>(g->node_of_rank.size()) == options.comm->world_size();
  LayerGroups groups = GroupLayers(
      options.layer_ranges,
      options.group_mb == 0 || one_node ? 0 : MibFloats(options.group_mb));
  absl::StatusOr<BucketPlan> plan = PlanBuckets(
      options.ready_ranges, options.size,
      static_cast<int64_t>(std::min(options.bucket_cap_mb * 1024 * 1024, 4e15)));
  if (!plan.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kLabel, ": ", plan.status().message()));
  }
  auto sync = std::make_unique<Zero3SyncImpl>(options, std::move(parts.optimizer),
                                              std::move(parts.clip), std::move(*plan),
                                              std::move(groups));
  sync->Start();
  return std::unique_ptr<Zero3Sync>(std::move(sync));
}

}  // namespace sync
}  // namespace tandem
