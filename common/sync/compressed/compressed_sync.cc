#include "common/sync/compressed/compressed_sync.h"

#include "common/sync/compressed/compressed_sync_internal.h"

namespace tandem {
namespace sync {
namespace compressed_internal {

void CompressedSync::Layout() {
  const int W = ex_size_;
  int64_t sums = 0, send = 0, recv = 0, slice = 0, workspace = 0, block = 0, share = 0;
  for (const Bucket& pb : engine_->plan().buckets) {
    BucketLayout b;
    b.lo = pb.lo;
    b.n = pb.size();
    b.compress = b.n * int64_t{sizeof(float)} >= min_bucket_bytes_;
    if (b.compress && sparse_) {
      b.block = Align8(codec_->MaxEncodedBytes(b.n));
      send = std::max(send, b.block);
      recv = std::max(recv, W * b.block);
      workspace = std::max(workspace, codec_->WorkspaceFloats(b.n));
    } else if (b.compress) {
      b.x_lo = b.lo;
      b.x_n = b.n;
      if (hier_) {
        b.share = (b.n + local_size_ - 1) / local_size_;
        b.x_lo = b.lo + local_rank_ * b.share;
        b.x_n = std::clamp<int64_t>(b.n - local_rank_ * b.share, 0, b.share);
        share = std::max(share, b.share);
      }
      // The stride of x's slices: from the full share, so every local rank
      // holds sum residuals of the same length (the state is gathered in
      // equal pieces); a short last share leaves its last slices empty.
      b.slice = ((hier_ ? b.share : b.n) + W - 1) / W;
      b.block = Align8(codec_->MaxEncodedBytes(b.slice));
      b.own_len = SliceLength(b, ex_rank_);
      // Room for a full slice on every rank, so the state has the same
      // length on every rank (gathered in equal pieces).
      b.sum_offset = sums;
      sums += b.slice;
      send = std::max(send, W * b.block);
      recv = std::max(recv, W * b.block);
      slice = std::max(slice, b.slice);
      block = std::max(block, b.block);
    }
    buckets_.push_back(b);
  }
  const int64_t residuals = feedback_ ? size_ : 0;
  const int64_t sum_residuals = feedback_ && !sparse_ ? sums : 0;
  const bool threshold = codec_->name() == "threshold";
  const int64_t nb = threshold ? static_cast<int64_t>(buckets_.size()) : 0;
  local_.assign(residuals + sum_residuals + nb, 0.f);
  if (feedback_ && momentum_correction_) {
    velocity_.assign(size_, 0.f);
    ef_ = std::make_unique<ErrorFeedback>(codec_.get(), absl::MakeSpan(local_.data(), residuals),
                                          absl::MakeSpan(velocity_), momentum_,
                                          momentum_masking_);
  } else if (feedback_) {
    ef_ = std::make_unique<ErrorFeedback>(codec_.get(), absl::MakeSpan(local_.data(), residuals));
  }
  if (feedback_) {
    if (!sparse_) {
      sum_ef_ = std::make_unique<ErrorFeedback>(
          codec_.get(), absl::MakeSpan(local_.data() + residuals, sum_residuals));
    }
  }
  if (threshold) {
    ThresholdControllerOptions t;
    t.density = density_;
    thresholds_ = std::make_unique<ThresholdController>(static_cast<int>(nb), t);
  }
  send_.assign(send, 0);
  recv_.assign(recv, 0);
  sum_block_.assign(block, 0);
  sum_.assign(slice, 0.f);
  workspace_.assign(workspace, 0.f);
  if (hier_) shares_ = std::make_unique<NodeShares>(intra_, share);
  piece_.assign(world_size_ * std::min<int64_t>(kStatePiece, local_.size()), 0.f);
}

// As AllreduceSync: every rank holds the same summed gradients, so every
// rank computes the same scale, clip factor and update.
absl::Status CompressedSync::Update(const optim::StepContext& context, int64_t step) {
  const OwnedShard whole{kLabel, rank_, world_size_, &clip_, {0, size_}, &ready_ranges_,
                         grads_, params_, optimizer_.get(), nullptr};
  return StepOwnedShard(whole, context, step, guard_.grad_scale(), guard_.options(), &report_);
}

}  // namespace compressed_internal

using codec::Codec;
using codec::CreateCodec;
using compressed_internal::CompressedSync;

absl::StatusOr<std::unique_ptr<GradientSync>> CreateCompressedSync(CompressedSyncOptions o) {
  if (o.comm == nullptr) {
    return absl::InvalidArgumentError("compressed sync: a communicator is required");
  }
  if (o.size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("compressed sync: negative size ", o.size));
  }
  if (o.size > 0 && (o.params == nullptr || o.grads == nullptr)) {
    return absl::InvalidArgumentError(
        "compressed sync: params and grads are required (the model's flat storage)");
  }
  if (o.optimizer == nullptr) {
    return absl::InvalidArgumentError("compressed sync: an optimizer is required");
  }
  if (o.optimizer->range().lo != 0 || o.optimizer->range().hi != o.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compressed sync: the optimizer covers [", o.optimizer->range().lo, ", ",
        o.optimizer->range().hi, ") but the strategy steps the whole vector [0, ", o.size, ")"));
  }
  if (o.groups != nullptr && o.groups->world.get() != o.comm) {
    return absl::InvalidArgumentError(
        "compressed sync: groups->world must be the communicator given as comm");
  }
  if (o.warmup_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed sync: warmup_steps must be >= 0, got ", o.warmup_steps));
  }
  if (!(o.min_bucket_kb >= 0) || !std::isfinite(o.min_bucket_kb)) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed sync: min_bucket_kb must be >= 0, got ", o.min_bucket_kb));
  }
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(o.codec);
  if (!codec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed sync: ", codec.status().message()));
  }
  if (o.make_device_stepper) {
    absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> s = o.make_device_stepper(o.optimizer.get());
    if (!s.ok()) {
      return absl::Status(s.status().code(),
                          absl::StrCat("compressed sync: device stepper: ", s.status().message()));
    }
    if (*s != nullptr) {
      return absl::InvalidArgumentError(
          "compressed sync: gradients in device memory are not supported yet (the codecs run on "
          "the host); use --backend cpu, or --sync allreduce on GPUs");
    }
  }
  if (o.momentum_correction) {
    if (!(*codec)->sparse() || !o.error_feedback) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compressed sync: momentum_correction needs a sparse codec (topk or threshold) with "
          "error feedback (ef=1); got codec=", o.codec.codec, ", ef=", o.error_feedback ? 1 : 0));
    }
    if (!(o.momentum >= 0 && o.momentum < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compressed sync: momentum_correction's momentum must be in [0, 1), got ", o.momentum));
    }
    // The momentum is applied here; an optimizer with state of its own
    // (sgd's momentum buffer, adamw's moments) would apply it again.
    if (o.optimizer->name() != "sgd" || !o.optimizer->state().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compressed sync: momentum_correction applies the SGD momentum itself, so the "
          "optimizer must be plain sgd (no momentum state); got '", o.optimizer->name(), "' with ",
          o.optimizer->state().size(), " state buffer(s)"));
    }
  }
  absl::StatusOr<GradClip> clip = GradClip::Create({o.max_grad_norm, nullptr});
  if (!clip.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("compressed sync: ", clip.status().message()));
  }
  std::unique_ptr<optim::Optimizer> optimizer = std::move(o.optimizer);
  auto sync = std::make_unique<CompressedSync>(o, std::move(*codec), std::move(optimizer),
                                               std::move(*clip));
  RETURN_IF_ERROR(sync->Start(o));
  return std::unique_ptr<GradientSync>(std::move(sync));
}

}  // namespace sync
}  // namespace tandem
