#include "common/sync/allreduce/allreduce_sync.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/log/log.h"
#include "common/optim/clip.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/hier_allreduce.h"
#include "common/sync/bucket/bucket_engine.h"
#include "common/sync/grad_check.h"
#include "common/sync/grad_clip.h"
#include "common/sync/step_guard.h"
#include "common/sync/step_owned_shard.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {
namespace {

constexpr char kLabel[] = "allreduce sync";

class AllreduceSync final : public GradientSync {
 public:
  AllreduceSync(const AllreduceSyncOptions& options, std::unique_ptr<optim::Optimizer> optimizer,
                std::unique_ptr<optim::DeviceStepper> owned_stepper, GradClip clip)
      : comm_(options.comm),
        params_(options.params),
        grads_(options.grads),
        size_(options.size),
        optimizer_(std::move(optimizer)),
        owned_stepper_(std::move(owned_stepper)),
        device_stepper_(owned_stepper_ != nullptr ? owned_stepper_.get() : options.device_stepper),
        clip_(std::move(clip)),
        world_size_(comm_->world_size()),
        rank_(comm_->rank()),
        groups_(options.groups),
        world_spans_nodes_(groups_ == nullptr || groups_->num_nodes > 1),
        ready_ranges_(options.ready_ranges),
        step_per_bucket_(options.step_per_bucket && device_stepper_ == nullptr &&
                         !clip_.enabled() && optimizer_->supports_slices()) {}

  // Second phase: the engine's operation captures `this`.
  absl::Status Start(const AllreduceSyncOptions& options) {
    BucketEngineOptions e;
    e.ready_ranges = options.ready_ranges;
    e.size = options.size;
    e.bucket_cap_mb = options.bucket_cap_mb;
    e.label = kLabel;
    e.operation_name = "allreduce";
    e.rank = rank_;
    e.operation = [this](int, int64_t lo, int64_t hi) { return RunBucket(lo, hi); };
    ASSIGN_OR_RETURN(engine_, BucketEngine::Create(std::move(e)));
    if (options.hierarchical) RETURN_IF_ERROR(StartHierarchical());
    // Clipping scales by the norm, so it keeps the one-pass sum (bit for bit
    // the other strategies'); the check only needs finiteness.
    fuse_check_ = comm_->fuses_sum_of_squares() && hier_ == nullptr &&
                  device_stepper_ == nullptr && !clip_.enabled();
    return absl::OkStatus();
  }

  std::string name() const override { return "allreduce"; }
  optim::ParamRange owned_range() const override { return {0, size_}; }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }

  absl::Status SyncStateToHost() override {
    return device_stepper_ != nullptr ? device_stepper_->SaveState() : absl::OkStatus();
  }
  absl::Status StateLoaded() override {
    return device_stepper_ != nullptr ? device_stepper_->LoadState() : absl::OkStatus();
  }

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(guard_.CheckBegin(options));
    report_ = StepReport{};
    PlanBucketSteps(options);  // before the engine's thread can see this step
    fused_step_ = fuse_check_ && (options.skip_non_finite || options.measure_grad_norm);
    fused_sum_sq_ = 0;
    return guard_.Started(engine_->BeginStep(), options);
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override { engine_->OnGradientsReady(lo, hi); }

  StepReport last_step() const override { return report_; }
  bool partially_updated() const override { return partial_.load(std::memory_order_relaxed); }

  absl::Status FinishStep(const optim::StepContext& context) override {
    RETURN_IF_ERROR(guard_.CheckFinish());
    absl::Status done = engine_->FinishStep();
    // Buckets may have been stepped (or be stepped by a collective still in
    // flight): this rank's state belongs to no step.
    if (!done.ok() && bucket_step_) partial_.store(true, std::memory_order_relaxed);
    RETURN_IF_ERROR(guard_.Record(std::move(done)));
    const int64_t step = engine_->stats().steps;  // this step, now counted
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = bucket_step_ ? CheckBucketContext(context, step) : Update(context, step);
    const double seconds =
        SecondsSince(start) + 1e-9 * bucket_step_ns_.exchange(0, std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    optimizer_seconds_ += seconds;
    RETURN_IF_ERROR(guard_.Record(s));
    ++steps_;
    return absl::OkStatus();
  }

  SyncMemory memory() const override {
    SyncMemory m;
    m.param_bytes = size_ * int64_t{sizeof(float)};
    m.grad_bytes = size_ * int64_t{sizeof(float)};  // reduced in place, whole vector
    m.optimizer_bytes = optimizer_->state_bytes();
    m.staging_bytes = hier_ != nullptr ? hier_->staging_bytes() : 0;
    return m;
  }

  SyncStats stats() const override {
    const BucketEngineStats e = engine_->stats();
    SyncStats s;
    s.buckets = e.buckets;
    s.bytes_sent = bytes_sent_.load(std::memory_order_relaxed);
    s.inter_node_bytes = inter_node_bytes_.load(std::memory_order_relaxed);
    s.comm_seconds = e.busy_seconds;
    s.exposed_wait_seconds = e.exposed_wait_seconds;
    absl::MutexLock lock(&mu_);
    s.steps = steps_;
    s.optimizer_seconds = optimizer_seconds_;
    return s;
  }

 private:
  // Every rank sees the same layout and the same backend, so every rank
  // makes the same choice and the collectives match.
  absl::Status StartHierarchical() {
    const std::string why =
        device_stepper_ != nullptr
            ? "the gradients are in device memory (its staging buffers are host memory)"
            : HierarchicalUnusableReason(*groups_);
    if (why.empty()) {
      int64_t largest = 0;
      for (const Bucket& b : engine_->plan().buckets) largest = std::max(largest, b.size());
      HierAllreduceOptions h;
      h.groups = groups_;
      h.max_count = largest;
      ASSIGN_OR_RETURN(hier_, HierAllreduce::Create(h));
      if (rank_ == 0) {
        LOG(INFO) << kLabel << ": hierarchical allreduce over " << groups_->num_nodes
                  << " nodes of " << hier_->local_size() << " ranks";
      }
      return absl::OkStatus();
    }
    if (rank_ != 0) return absl::OkStatus();
    // One node, or one rank per node: the flat ring is what hier would do.
    const bool same_as_flat = device_stepper_ == nullptr &&
                              (groups_->num_nodes <= 1 || groups_->num_nodes == world_size_);
    if (same_as_flat) {
      LOG(INFO) << kLabel << ": hier=1 uses flat ring allreduce: " << why;
    } else {
      LOG(WARNING) << kLabel
                   << ": hier=1 falls back to flat ring allreduce for this generation: " << why;
    }
    return absl::OkStatus();
  }

  // The engine's per-bucket operation (communication thread).
  absl::Status RunBucket(int64_t lo, int64_t hi) {
    const int64_t n = hi - lo;
    constexpr int64_t kFloat = sizeof(float);
    if (hier_ != nullptr) {
      RETURN_IF_ERROR(hier_->Run(grads_ + lo, n));
      // Reduce-scatter of the padded bucket, the share across nodes, the
      // share into the allgather; only the share crosses nodes.
      const int64_t share = hier_->ShareCount(n);
      bytes_sent_.fetch_add((share * hier_->local_size() + 2 * share) * kFloat,
                            std::memory_order_relaxed);
      inter_node_bytes_.fetch_add(share * kFloat, std::memory_order_relaxed);
      return bucket_step_ ? StepBucket(lo, hi) : absl::OkStatus();
    }
    if (fused_step_) {
      double sum_sq = 0;
      RETURN_IF_ERROR(comm_->AllReduceSumOfSquares(grads_ + lo, n, &sum_sq));
      fused_sum_sq_ += sum_sq;  // buckets in plan order: the same sum on every rank
    } else {
      RETURN_IF_ERROR(comm_->AllReduce(grads_ + lo, n, ReduceOp::kSum));
    }
    bytes_sent_.fetch_add(n * kFloat, std::memory_order_relaxed);
    if (world_spans_nodes_) inter_node_bytes_.fetch_add(n * kFloat, std::memory_order_relaxed);
    return bucket_step_ ? StepBucket(lo, hi) : absl::OkStatus();
  }

  // Whether this step's buckets are stepped as they complete, and with
  // which context: the scale StepOwnedShard would use with no clipping
  // (grad_scale * BeginStep's grad_scale / world, in the same order), so
  // the bits are the whole-vector step's.
  void PlanBucketSteps(const StepOptions& o) {
    bucket_step_ = step_per_bucket_ && o.context.has_value() && !o.skip_non_finite &&
                   !o.measure_grad_norm && o.context->step >= 1 && std::isfinite(o.context->lr);
    if (!bucket_step_) return;
    given_context_ = *o.context;
    bucket_context_ = given_context_;
    const double scale = static_cast<double>(given_context_.grad_scale) *
                         static_cast<double>(o.grad_scale) / world_size_;
    bucket_context_.grad_scale = static_cast<float>(scale * 1.0);
    if (!std::isfinite(bucket_context_.grad_scale)) bucket_step_ = false;
  }

  // The engine's thread, right after bucket [lo, hi)'s allreduce.
  absl::Status StepBucket(int64_t lo, int64_t hi) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = optimizer_->StepSlice(params_ + lo, grads_ + lo, lo, hi - lo, bucket_context_);
    bucket_step_ns_.fetch_add(static_cast<int64_t>(1e9 * SecondsSince(start)),
                              std::memory_order_relaxed);
    if (s.ok()) return s;
    return absl::Status(s.code(), absl::StrCat(kLabel, ": optimizer ", optimizer_->name(),
                                               " on bucket [", lo, ", ", hi, "): ", s.message()));
  }

  // FinishStep of a step whose buckets were stepped: the update used
  // BeginStep's context, so FinishStep's must be the same.
  absl::Status CheckBucketContext(const optim::StepContext& c, int64_t step) const {
    const optim::StepContext& g = given_context_;
    if (c.step == g.step && c.lr == g.lr && c.grad_scale == g.grad_scale) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        kLabel, ": FinishStep's context (step ", c.step, ", lr ", c.lr, ", grad_scale ",
        c.grad_scale, ") at step ", step, " differs from StepOptions::context (step ", g.step,
        ", lr ", g.lr, ", grad_scale ", g.grad_scale,
        "), with which the buckets were already stepped; pass the same context to both"));
  }

  // Every rank now holds the same summed gradients, so every rank computes
  // the same scale, the same clip factor and the same update.
  absl::Status Update(const optim::StepContext& context, int64_t step) {
    OwnedShard whole{kLabel, rank_, world_size_, &clip_, {0, size_}, &ready_ranges_,
                     grads_, params_, optimizer_.get(), device_stepper_};
    if (fused_step_) whole.owned_sum_sq = &fused_sum_sq_;
    return StepOwnedShard(whole, context, step, guard_.grad_scale(), guard_.options(), &report_);
  }

  Communicator* const comm_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const std::unique_ptr<optim::DeviceStepper> owned_stepper_;  // may be null
  optim::DeviceStepper* const device_stepper_;                 // owned or borrowed, may be null
  GradClip clip_;
  const int world_size_;
  const int rank_;
  const CommGroups* const groups_;  // may be null (flat, layout unknown)
  const bool world_spans_nodes_;
  const std::vector<std::pair<int64_t, int64_t>> ready_ranges_;
  const bool step_per_bucket_;  // options allow it; each step decides (bucket_step_)
  bool fuse_check_ = false;     // set in Start: the communicator can, the step allows it
  // Set in Start before any step, then used by the communication thread only.
  std::unique_ptr<HierAllreduce> hier_;  // null: flat ring over comm_
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> inter_node_bytes_{0};
  std::atomic<int64_t> bucket_step_ns_{0};  // per-bucket stepping, for optimizer_seconds
  std::atomic<bool> partial_{false};
  // Written by BeginStep before the engine's BeginStep, read by the engine's
  // thread during the step (the engine's hand-off orders the two).
  bool bucket_step_ = false;
  // The non-finite check (and measure_grad_norm) from the reduce pass
  // (Communicator::AllReduceSumOfSquares): the sum over this step's buckets.
  bool fused_step_ = false;
  double fused_sum_sq_ = 0;
  optim::StepContext given_context_;   // StepOptions::context
  optim::StepContext bucket_context_;  // with the averaged scale

  // Trainer thread only.
  StepGuard guard_{kLabel};
  StepReport report_;

  mutable absl::Mutex mu_;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  double optimizer_seconds_ ABSL_GUARDED_BY(mu_) = 0;

  std::unique_ptr<BucketEngine> engine_;  // last: its thread calls into the members above
};

}  // namespace

absl::StatusOr<std::unique_ptr<GradientSync>> CreateAllreduceSync(AllreduceSyncOptions options) {
  if (options.comm == nullptr) {
    return absl::InvalidArgumentError("allreduce sync: a communicator is required");
  }
  if (options.size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("allreduce sync: negative size ", options.size));
  }
  if (options.size > 0 && (options.params == nullptr || options.grads == nullptr)) {
    return absl::InvalidArgumentError(
        "allreduce sync: params and grads are required (the model's flat storage)");
  }
  if (options.optimizer == nullptr) {
    return absl::InvalidArgumentError("allreduce sync: an optimizer is required");
  }
  if (options.optimizer->range().lo != 0 || options.optimizer->range().hi != options.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allreduce sync: the optimizer covers [", options.optimizer->range().lo, ", ",
        options.optimizer->range().hi, ") but the allreduce strategy steps the whole vector [0, ",
        options.size, ")"));
  }
  if (options.groups != nullptr && options.groups->world.get() != options.comm) {
    return absl::InvalidArgumentError(
        "allreduce sync: groups->world must be the communicator given as comm");
  }
  if (options.hierarchical && (options.groups == nullptr || options.groups->intra == nullptr ||
                               options.groups->inter == nullptr)) {
    return absl::InvalidArgumentError(
        "allreduce sync: hierarchical allreduce needs groups with the intra-node and inter-node "
        "communicators (CreateCommGroups with node_groups = true)");
  }
  if (options.device_stepper != nullptr && options.make_device_stepper) {
    return absl::InvalidArgumentError(
        "allreduce sync: give device_stepper or make_device_stepper, not both");
  }
  absl::StatusOr<GradClip> clip = GradClip::Create({options.max_grad_norm, nullptr});
  if (!clip.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("allreduce sync: ", clip.status().message()));
  }
  std::unique_ptr<optim::DeviceStepper> stepper;
  if (options.make_device_stepper) {
    absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> s =
        options.make_device_stepper(options.optimizer.get());
    if (!s.ok()) {
      return absl::Status(s.status().code(),
                          absl::StrCat("allreduce sync: device stepper: ", s.status().message()));
    }
    stepper = std::move(*s);  // null: the factory chose host memory
  }
  std::unique_ptr<optim::Optimizer> optimizer = std::move(options.optimizer);
  auto sync = std::make_unique<AllreduceSync>(options, std::move(optimizer), std::move(stepper),
                                              std::move(*clip));
  RETURN_IF_ERROR(sync->Start(options));
  return std::unique_ptr<GradientSync>(std::move(sync));
}

}  // namespace sync
}  // namespace tandem
