#include "common/sync/compressed/powersgd_sync.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "common/codec/powersgd_math.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/compressed/powersgd_sync_internal.h"
#include "common/sync/rank0_state.h"
#include "common/sync/step_owned_shard.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {
namespace powersgd_internal {

using codec::MatrixView;

PowerSgdSync::PowerSgdSync(const PowerSgdSyncOptions& o,
                           std::unique_ptr<optim::Optimizer> optimizer, GradClip clip)
    : comm_(o.comm),
      params_(o.params),
      grads_(o.grads),
      size_(o.size),
      r_(o.rank),
      warmup_steps_(o.warmup_steps),
      min_compression_(o.min_compression),
      compress_embeddings_(o.compress_embeddings),
      feedback_(o.error_feedback),
      seed_(o.seed),
      optimizer_(std::move(optimizer)),
      clip_(std::move(clip)),
      world_size_(comm_->world_size()),
      rank_(comm_->rank()),
      world_spans_nodes_(o.groups == nullptr || o.groups->num_nodes > 1),
      ready_ranges_(o.ready_ranges) {}

absl::Status PowerSgdSync::Start(const PowerSgdSyncOptions& o) {
  BucketEngineOptions e;
  e.ready_ranges = o.ready_ranges;
  e.size = o.size;
  e.bucket_cap_mb = o.bucket_cap_mb;
  e.label = kLabel;
  e.operation_name = "powersgd exchange";
  e.rank = rank_;
  e.operation = [this](int b, int64_t lo, int64_t hi) { return RunBucket(b, lo, hi); };
  ASSIGN_OR_RETURN(engine_, BucketEngine::Create(std::move(e)));
  Layout(o.param_shapes);
  return absl::OkStatus();
}

// Matrices by offset; each bucket takes the ones wholly inside it (a
// bucket is whole ready ranges, so a weight never straddles two) and sends
// the rest of its range uncompressed.
void PowerSgdSync::Layout(const std::vector<ParamShape>& shapes) {
  std::vector<PsgdMatrix> all;
  for (const ParamShape& s : shapes) {
    if (!compress_embeddings_ && IsEmbeddingName(s.name)) continue;
    const MatrixView v = codec::ViewAsMatrix(s.shape);
    if (codec::PowerSgdCompresses(v, r_, min_compression_)) all.push_back({s.offset, v.rows, v.cols});
  }
  std::sort(all.begin(), all.end(),
            [](const PsgdMatrix& a, const PsgdMatrix& b) { return a.lo < b.lo; });
  int64_t q = 0, res = 0, staging = 0;
  for (const Bucket& pb : engine_->plan().buckets) {
    PsgdBucket B;
    B.q_lo = q;
    int64_t at = pb.lo;
    for (PsgdMatrix m : all) {
      if (m.lo < pb.lo || m.lo + m.rows * m.cols > pb.hi) continue;
      if (m.lo > at) B.dense.push_back({at, m.lo});
      m.p_at = B.p_floats;
      m.q_at = q;
      m.res_at = res;
      B.p_floats += r_ * m.rows;
      q += r_ * m.cols;
      if (feedback_) res += m.rows * m.cols;
      at = m.lo + m.rows * m.cols;
      B.matrices.push_back(m);
    }
    if (at < pb.hi) B.dense.push_back({at, pb.hi});
    for (const auto& [lo, hi] : B.dense) B.dense_floats += hi - lo;
    B.q_floats = q - B.q_lo;
    staging = std::max(staging, B.p_floats + B.dense_floats);
    compressed_matrices_ += static_cast<int64_t>(B.matrices.size());
    buckets_.push_back(std::move(B));
  }
  q_.assign(q, 0.f);
  residuals_.assign(res, 0.f);
  p_.assign(staging, 0.f);
  piece_.assign(world_size_ * std::min<int64_t>(kRank0StatePiece, std::max<int64_t>(res, 1)), 0.f);
  ResetState();
}

void PowerSgdSync::ResetState() {
  std::fill(residuals_.begin(), residuals_.end(), 0.f);
  for (const PsgdBucket& B : buckets_) {
    for (const PsgdMatrix& m : B.matrices) {
      codec::FillStandardNormal(seed_ + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(m.lo + 1),
                                q_.data() + m.q_at, r_ * m.cols);
    }
  }
}

absl::Status PowerSgdSync::RunBucket(int b, int64_t lo, int64_t hi) {
  const PsgdBucket& B = buckets_[b];
  if (compress_now_ && !B.matrices.empty()) return Compress(b, B);
  RETURN_IF_ERROR(comm_->AllReduce(grads_ + lo, hi - lo, ReduceOp::kSum));
  stats_.Sent((hi - lo) * int64_t{sizeof(float)});
  stats_.Uncompressed();
  return absl::OkStatus();
}

absl::Status PowerSgdSync::Compress(int b, const PsgdBucket& B) {
  float* p = p_.data();
  int64_t elements = 0;
  for (const PsgdMatrix& m : B.matrices) {
    float* g = grads_ + m.lo;
    const int64_t n = m.rows * m.cols;
    if (feedback_) {
      const float* e = residuals_.data() + m.res_at;
      for (int64_t i = 0; i < n; ++i) g[i] += e[i];
    }
    codec::ProjectP(g, m.rows, m.cols, q_.data() + m.q_at, r_, p + m.p_at);
    elements += n;
  }
  float* d = p + B.p_floats;
  for (const auto& [lo, hi] : B.dense) d = std::copy(grads_ + lo, grads_ + hi, d);
  RETURN_IF_ERROR(Annotate(comm_->AllReduce(p, B.p_floats + B.dense_floats, ReduceOp::kSum),
                           absl::StrCat(kLabel, ": allreduce of bucket ", b, "'s P factors")));
  d = p + B.p_floats;
  for (const auto& [lo, hi] : B.dense) {
    std::copy(d, d + (hi - lo), grads_ + lo);
    d += hi - lo;
  }
  for (const PsgdMatrix& m : B.matrices) {
    codec::OrthonormalizeRows(p + m.p_at, r_, m.rows);
    codec::ProjectQ(grads_ + m.lo, m.rows, m.cols, p + m.p_at, r_, q_.data() + m.q_at);
  }
  RETURN_IF_ERROR(Annotate(comm_->AllReduce(q_.data() + B.q_lo, B.q_floats, ReduceOp::kSum),
                           absl::StrCat(kLabel, ": allreduce of bucket ", b, "'s Q factors")));
  // P Q^T is the sum over ranks; this rank's residual is what its own M
  // lost against the average.
  const float inv_world = 1.f / static_cast<float>(world_size_);
  double sq = 0;
  for (const PsgdMatrix& m : B.matrices) {
    float* g = grads_ + m.lo;
    const int64_t n = m.rows * m.cols;
    float* e = feedback_ ? residuals_.data() + m.res_at : nullptr;
    if (e != nullptr) std::copy(g, g + n, e);
    codec::Reconstruct(p + m.p_at, q_.data() + m.q_at, m.rows, m.cols, r_, g);
    if (e == nullptr) continue;
    for (int64_t i = 0; i < n; ++i) {
      e[i] -= g[i] * inv_world;
      sq += static_cast<double>(e[i]) * e[i];
    }
  }
  residual_sq_ += sq;
  constexpr int64_t kFloat = sizeof(float);
  stats_.Sent((B.p_floats + B.dense_floats + B.q_floats) * kFloat);
  stats_.Compressed(elements * kFloat, (B.p_floats + B.q_floats) * kFloat);
  return absl::OkStatus();
}

absl::Status PowerSgdSync::BeginStep(const StepOptions& options) {
  RETURN_IF_ERROR(guard_.CheckBegin(options));
  // Rank 0's copy of every rank's residuals served the last checkpoint.
  if (!gathered_.empty()) std::vector<float>().swap(gathered_);
  report_ = StepReport{};
  // Residuals are in the units of the gradients as computed: a changed
  // grad_scale (fp16 loss scaling) rescales them (Q's scale does not
  // matter: P is orthonormalized).
  if (last_grad_scale_ > 0 && options.grad_scale > 0 && options.grad_scale != last_grad_scale_) {
    const float f = last_grad_scale_ / options.grad_scale;
    for (float& e : residuals_) e *= f;
  }
  last_grad_scale_ = options.grad_scale;
  compress_now_ = steps_done_ >= warmup_steps_;
  residual_sq_ = 0;
  return guard_.Started(engine_->BeginStep(), options);
}

absl::Status PowerSgdSync::FinishStep(const optim::StepContext& context) {
  RETURN_IF_ERROR(guard_.CheckFinish());
  RETURN_IF_ERROR(guard_.Record(engine_->FinishStep()));
  const auto start = std::chrono::steady_clock::now();
  const OwnedShard whole{kLabel, rank_, world_size_, &clip_, {0, size_}, &ready_ranges_,
                         grads_, params_, optimizer_.get(), nullptr};
  absl::Status s = StepOwnedShard(whole, context, engine_->stats().steps, guard_.grad_scale(),
                                  guard_.options(), &report_);
  // A skipped step's residuals and Q hold what its non-finite gradients
  // left: both start again, on every rank alike.
  if (s.ok() && !report_.applied && compress_now_) ResetState();
  ++steps_done_;
  const bool gauge = feedback_ && compress_now_;
  stats_.StepFinished(SecondsSince(start), s.ok(),
                      !gauge ? -1 : report_.applied ? std::sqrt(residual_sq_) : 0);
  return guard_.Record(s);
}

SyncMemory PowerSgdSync::memory() const {
  SyncMemory m;
  m.param_bytes = size_ * int64_t{sizeof(float)};
  m.grad_bytes = size_ * int64_t{sizeof(float)};
  m.optimizer_bytes = optimizer_->state_bytes();
  m.staging_bytes = static_cast<int64_t>(q_.size() + residuals_.size() + p_.size() +
                                         gathered_.size() + piece_.size()) *
                    int64_t{sizeof(float)};
  return m;
}

}  // namespace powersgd_internal

namespace {

// The largest rank any weight of `shapes` compresses at.
int64_t LargestUsableRank(const std::vector<ParamShape>& shapes, double min_compression,
                          bool compress_embeddings) {
  int64_t best = 0;
  for (const ParamShape& s : shapes) {
    if (!compress_embeddings && IsEmbeddingName(s.name)) continue;
    const codec::MatrixView v = codec::ViewAsMatrix(s.shape);
    if (v.rows < 2 || v.cols < 2) continue;
    const double k = static_cast<double>(v.rows) * static_cast<double>(v.cols) /
                     (min_compression * static_cast<double>(v.rows + v.cols));
    best = std::max(best, static_cast<int64_t>(std::floor(k)));
  }
  return best;
}

absl::Status CheckPowerSgdOptions(const PowerSgdSyncOptions& o) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("compressed sync (powersgd): ", parts...));
  };
  if (o.comm == nullptr) return bad("a communicator is required");
  if (o.size < 0) return bad("negative size ", o.size);
  if (o.size > 0 && (o.params == nullptr || o.grads == nullptr)) {
    return bad("params and grads are required (the model's flat storage)");
  }
  if (o.optimizer == nullptr) return bad("an optimizer is required");
  if (o.optimizer->range().lo != 0 || o.optimizer->range().hi != o.size) {
    return bad("the optimizer covers [", o.optimizer->range().lo, ", ", o.optimizer->range().hi,
               ") but the strategy steps the whole vector [0, ", o.size, ")");
  }
  if (o.groups != nullptr && o.groups->world.get() != o.comm) {
    return bad("groups->world must be the communicator given as comm");
  }
  if (o.rank < 1) return bad("rank must be >= 1, got ", o.rank);
  if (o.warmup_steps < 0) return bad("warmup_steps must be >= 0, got ", o.warmup_steps);
  if (!(o.min_compression >= 1) || !std::isfinite(o.min_compression)) {
    return bad("min_compression must be >= 1, got ", o.min_compression);
  }
  if (o.param_shapes.empty()) {
    return bad("the model's parameter shapes are required (SyncEnv::param_shapes): PowerSGD "
               "compresses each weight as a matrix");
  }
  const int64_t largest =
      LargestUsableRank(o.param_shapes, o.min_compression, o.compress_embeddings);
  if (largest < 1) {
    return bad("no weight of this model is large enough to compress at min_compression=",
               o.min_compression, o.compress_embeddings ? "" : " (embeddings=0: embedding tables "
               "are not compressed)", ": use another codec (int8, topk) or --sync allreduce");
  }
  if (o.rank > largest) {
    return bad("rank=", o.rank, " is larger than any weight of this model allows (the largest "
               "compresses at rank <= ", largest, " with min_compression=", o.min_compression,
               "): choose rank between 1 and ", largest);
  }
  return absl::OkStatus();
}

}  // namespace

bool IsEmbeddingName(const std::string& name) {
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    if (absl::StrContains(absl::AsciiStrToLower(part), "embed") ||
        absl::EqualsIgnoreCase(part, "wte") ||
        absl::EqualsIgnoreCase(part, "wpe")) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<std::unique_ptr<GradientSync>> CreatePowerSgdSync(PowerSgdSyncOptions o) {
  RETURN_IF_ERROR(CheckPowerSgdOptions(o));
  if (o.make_device_stepper) {
    absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> s = o.make_device_stepper(o.optimizer.get());
    if (!s.ok()) return Annotate(s.status(), "compressed sync (powersgd): device stepper");
    if (*s != nullptr) {
      return absl::InvalidArgumentError(
          "compressed sync (powersgd): gradients in device memory are not supported yet (the "
          "factors are computed on the host); use --backend cpu, or --sync allreduce on GPUs");
    }
  }
  ASSIGN_OR_RETURN(GradClip clip, GradClip::Create({o.max_grad_norm, nullptr}));
  std::unique_ptr<optim::Optimizer> optimizer = std::move(o.optimizer);
  auto sync = std::make_unique<powersgd_internal::PowerSgdSync>(o, std::move(optimizer),
                                                                std::move(clip));
  RETURN_IF_ERROR(sync->Start(o));
  return std::unique_ptr<GradientSync>(std::move(sync));
}

}  // namespace sync
}  // namespace tandem
