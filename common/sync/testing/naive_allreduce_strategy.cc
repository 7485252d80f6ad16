// Test-only strategy "naive_allreduce", registered to prove the strategy
// seam: no buckets and no overlap. OnGradientsReady only counts elements;
// FinishStep allreduces the whole gradient (in `chunks` pieces), averages,
// clips (grad_clip.h) and steps the optimizer over [0, n). With identical
// per-element sums (2 ranks: a + b either way) it produces the same
// parameters as "allreduce" bit for bit. --sync_opt chunks=N (default 1).
//
// Thread-safety as gradient_sync.h; failure: the collective's error from
// FinishStep (nothing applied), a step whose ranges do not cover [0, n)
// exactly is FAILED_PRECONDITION; after an error every call fails.
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/optim/clip.h"
#include "common/status/status_macros.h"
#include "common/sync/grad_clip.h"
#include "common/sync/registry.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {
namespace {

constexpr char kName[] = "naive_allreduce";

class NaiveAllreduceSync final : public GradientSync {
 public:
  NaiveAllreduceSync(Communicator* comm, float* params, float* grads, int64_t size, int64_t chunks,
                     std::unique_ptr<optim::Optimizer> optimizer,
                     std::unique_ptr<optim::DeviceStepper> stepper, GradClip clip)
      : comm_(comm),
        params_(params),
        grads_(grads),
        size_(size),
        chunks_(chunks),
        optimizer_(std::move(optimizer)),
        stepper_(std::move(stepper)),
        clip_(std::move(clip)) {}

  std::string name() const override { return kName; }
  optim::ParamRange owned_range() const override { return {0, size_}; }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }
  absl::Status SyncStateToHost() override {
    return stepper_ != nullptr ? stepper_->SaveState() : absl::OkStatus();
  }
  absl::Status StateLoaded() override {
    return stepper_ != nullptr ? stepper_->LoadState() : absl::OkStatus();
  }

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(CheckUsable());
    if (in_step_) {
      return absl::FailedPreconditionError(
          absl::StrCat(kName, ": BeginStep called twice without FinishStep in between"));
    }
    if (!std::isfinite(options.grad_scale)) {
      return absl::InvalidArgumentError(
          absl::StrCat(kName, ": grad_scale must be finite, got ", options.grad_scale));
    }
    grad_scale_ = options.grad_scale;
    reported_.store(0);
    in_step_ = true;
    return absl::OkStatus();
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override { reported_.fetch_add(hi - lo); }

  absl::Status FinishStep(const optim::StepContext& context) override {
    RETURN_IF_ERROR(CheckUsable());
    if (!in_step_) {
      return absl::FailedPreconditionError(absl::StrCat(kName, ": FinishStep without BeginStep"));
    }
    in_step_ = false;
    absl::Status s = Finish(context);
    if (!s.ok()) broken_ = s;
    return s;
  }

  SyncStats stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }
  SyncMemory memory() const override {
    return SyncMemory{size_ * int64_t{sizeof(float)}, size_ * int64_t{sizeof(float)},
                      optimizer_->state_bytes(), 0};
  }

 private:
  absl::Status CheckUsable() const {
    if (broken_.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(kName, ": used after an earlier error (", broken_.message(), ")"));
  }

  absl::Status Finish(const optim::StepContext& context) {
    const int64_t step = stats().steps + 1;
    if (reported_.load() != size_) {
      return absl::FailedPreconditionError(
          absl::StrCat(kName, ": ", reported_.load(), " of ", size_,
                       " gradient elements were reported before FinishStep at step ", step));
    }
    const auto comm_start = std::chrono::steady_clock::now();
    int64_t launched = 0;
    for (int64_t c = 0; c < chunks_; ++c) {
      const int64_t lo = size_ * c / chunks_;
      const int64_t hi = size_ * (c + 1) / chunks_;
      if (hi == lo) continue;  // the same on every rank
      absl::Status s = comm_->AllReduce(grads_ + lo, hi - lo, ReduceOp::kSum);
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat(kName, ": allreduce of piece ", c + 1, " of ",
                                                   chunks_, " at step ", step, " on rank ",
                                                   comm_->rank(), " failed: ", s.message()));
      }
      ++launched;
    }
    const double comm_seconds = SecondsSince(comm_start);
    const auto opt_start = std::chrono::steady_clock::now();
    double scale = static_cast<double>(context.grad_scale) * grad_scale_ / comm_->world_size();
    if (clip_.enabled() && size_ > 0) {
      double sum_sq = 0;
      if (stepper_ != nullptr) {
        ASSIGN_OR_RETURN(sum_sq, stepper_->SumOfSquares(grads_, size_));
      } else {
        sum_sq = optim::PartialSumOfSquares(absl::MakeConstSpan(grads_, size_));
      }
      ASSIGN_OR_RETURN(optim::ClipResult clip, clip_.Compute(sum_sq, scale));
      scale *= clip.scale;
    }
    if (size_ > 0) {
      optim::StepContext ctx = context;
      ctx.grad_scale = static_cast<float>(scale);
      RETURN_IF_ERROR(stepper_ != nullptr ? stepper_->Step(params_, grads_, size_, ctx)
                                          : optimizer_->Step(params_, grads_, size_, ctx));
    }
    absl::MutexLock lock(&mu_);
    ++stats_.steps;
    stats_.buckets += launched;
    stats_.bytes_sent += size_ * static_cast<int64_t>(sizeof(float));
    stats_.comm_seconds += comm_seconds;
    stats_.exposed_wait_seconds += comm_seconds;  // nothing overlaps
    stats_.optimizer_seconds += SecondsSince(opt_start);
    return absl::OkStatus();
  }

  Communicator* const comm_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const int64_t chunks_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  const std::unique_ptr<optim::DeviceStepper> stepper_;  // may be null
  GradClip clip_;

  bool in_step_ = false;  // trainer thread
  float grad_scale_ = 1.0f;
  absl::Status broken_;
  std::atomic<int64_t> reported_{0};  // elements reported this step
  mutable absl::Mutex mu_;
  SyncStats stats_ ABSL_GUARDED_BY(mu_);
};

StrategyInfo NaiveInfo() {
  StrategyInfo info;
  info.name = kName;
  info.summary =
      "test only: one allreduce of the whole gradient after backward (no buckets, no "
      "overlap), then average, clip and step";
  info.options = {{"chunks", "1", "pieces the allreduce is split into, >= 1"}};
  info.validate = [](const SyncOptions& o) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t chunks, GetSyncOptInt(o, "chunks", 1));
    if (chunks < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunks must be an integer >= 1, got ", chunks));
    }
    return absl::OkStatus();
  };
  return info;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreateNaive(const SyncOptions& options, SyncEnv env) {
  ASSIGN_OR_RETURN(int64_t chunks, GetSyncOptInt(options, "chunks", 1));
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> optimizer,
                   env.make_optimizer(optim::ParamRange{0, env.size}));
  if (optimizer == nullptr || optimizer->range().lo != 0 || optimizer->range().hi != env.size) {
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": make_optimizer must return an optimizer over [0, ", env.size, ")"));
  }
  ASSIGN_OR_RETURN(GradClip clip, GradClip::Create({options.max_grad_norm, nullptr}));
  std::unique_ptr<optim::DeviceStepper> stepper;
  if (env.make_device_stepper) {
    ASSIGN_OR_RETURN(stepper, env.make_device_stepper(optimizer.get()));
  }
  return std::unique_ptr<GradientSync>(
      new NaiveAllreduceSync(env.comms->world.get(), env.params, env.grads, env.size, chunks,
                             std::move(optimizer), std::move(stepper), std::move(clip)));
}

TANDEM_REGISTER_SYNC_STRATEGY(NaiveInfo(), CreateNaive);

}  // namespace
}  // namespace sync
}  // namespace tandem
