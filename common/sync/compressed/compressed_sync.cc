#include "common/sync/compressed/compressed_sync.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/codec/error_feedback.h"
#include "common/codec/threshold_controller.h"
#include "common/log/log.h"
#include "common/optim/clip.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/hier_allreduce.h"
#include "common/sync/bucket/bucket_engine.h"
#include "common/sync/grad_check.h"
#include "common/sync/rank0_state.h"
#include "common/sync/grad_clip.h"
#include "common/sync/step_guard.h"
#include "common/sync/step_owned_shard.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {

using codec::Codec;
using codec::CreateCodec;
using codec::EncodeParams;
using codec::ErrorFeedback;
using codec::ThresholdController;
using codec::ThresholdControllerOptions;
namespace {

constexpr char kLabel[] = "compressed sync";
constexpr char kMetaName[] = "compressed/meta";
constexpr char kResidualsName[] = "compressed/residuals";
constexpr char kVelocityName[] = "compressed/velocity";
// "TDMC" + layout version: tells saved compression state from zeros.
constexpr int64_t kMagic = 0x54444d43'00000001;
// "TDMV" + version: the first 2 floats of a saved velocity (a checkpoint
// without one, or whose blob did not fit, holds zeros there).
constexpr int64_t kVelocityMagic = 0x54444d56'00000001;
constexpr int64_t kVelocityTag = 2;  // floats
// Meta fields (int64, stored in a float buffer bit for bit).
// kExchange: 0 dense over the world, 1 sparse, 2 dense hierarchical (the
// residuals of one do not fit another).
enum Meta { kMagicField, kWorld, kSize, kLocal, kBuckets, kSteps, kExchange, kMetaFields };
// State moves to and from rank 0 in pieces of this many floats per rank.
constexpr int64_t kStatePiece = kRank0StatePiece;

int64_t Align8(int64_t bytes) { return (bytes + 7) / 8 * 8; }

uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// What the engine's operation needs to know about one bucket, fixed at
// creation.
// Dense codecs exchange a vector x: the whole bucket over the world, or
// (hierarchical) this local rank's share of the node's sum over `inter`.
struct BucketLayout {
  int64_t lo = 0;
  int64_t n = 0;
  bool compress = false;   // false: plain allreduce (below min_bucket_kb)
  int64_t share = 0;       // hierarchical: ceil(n / local ranks), else 0
  int64_t x_lo = 0;        // dense: x's flat offset (lo, or lo + local_rank * share)
  int64_t x_n = 0;         // dense: x's length (n, or this local rank's share)
  int64_t slice = 0;       // dense: S = ceil(x_n / ranks exchanging)
  int64_t block = 0;       // bytes per rank's block (8-aligned)
  int64_t own_len = 0;     // dense: this rank's slice length
  int64_t sum_offset = 0;  // dense: where its sum residual starts
};

int64_t SliceLength(const BucketLayout& b, int j) {
  return std::clamp<int64_t>(b.x_n - j * b.slice, 0, b.slice);
}

// Where slice j starts in x (an empty slice starts at x's end).
int64_t SliceStart(const BucketLayout& b, int j) { return std::min(j * b.slice, b.x_n); }

class CompressedSync final : public GradientSync {
 public:
  CompressedSync(const CompressedSyncOptions& o, std::unique_ptr<Codec> codec,
                 std::unique_ptr<optim::Optimizer> optimizer, GradClip clip)
      : comm_(o.comm),
        params_(o.params),
        grads_(o.grads),
        size_(o.size),
        codec_(std::move(codec)),
        sparse_(codec_->sparse()),
        feedback_(o.error_feedback),
        warmup_steps_(o.warmup_steps),
        min_bucket_bytes_(static_cast<int64_t>(o.min_bucket_kb * 1024)),
        density_(o.codec.density),
        momentum_correction_(o.momentum_correction),
        momentum_(o.momentum),
        momentum_masking_(o.momentum_masking),
        optimizer_(std::move(optimizer)),
        clip_(std::move(clip)),
        world_size_(comm_->world_size()),
        rank_(comm_->rank()),
        world_spans_nodes_(o.groups == nullptr || o.groups->num_nodes > 1),
        hier_(o.hierarchical && UseHierarchical(o, codec_->sparse())),
        exchange_(hier_ ? o.groups->inter.get() : comm_),
        intra_(hier_ ? o.groups->intra.get() : nullptr),
        ex_size_(exchange_->world_size()),
        ex_rank_(exchange_->rank()),
        local_rank_(hier_ ? intra_->rank() : 0),
        local_size_(hier_ ? intra_->world_size() : 1),
        ready_ranges_(o.ready_ranges) {}

  // hier=1 runs hierarchically for dense codecs on equal nodes; otherwise
  // the flat exchange, said once in rank 0's log. Every rank sees the same
  // layout, so every rank makes the same choice.
  static bool UseHierarchical(const CompressedSyncOptions& o, bool sparse) {
    std::string why;
    if (o.groups == nullptr || o.groups->intra == nullptr || o.groups->inter == nullptr) {
      why = "no node groups were built";
    } else if (sparse) {
      why = "sparse codecs allgather index/value pairs over the world";
    } else {
      why = HierarchicalUnusableReason(*o.groups);
    }
    if (why.empty()) {
      if (o.comm->rank() == 0) {
        LOG(INFO) << kLabel << ": hierarchical exchange over " << o.groups->num_nodes
                  << " nodes of " << o.groups->intra->world_size() << " ranks";
      }
      return true;
    }
    if (o.comm->rank() == 0) LOG(INFO) << kLabel << ": hier=1 uses the flat exchange: " << why;
    return false;
  }

  // Second phase: the engine's operation captures `this`; the buffers are
  // sized from its plan.
  absl::Status Start(const CompressedSyncOptions& o) {
    BucketEngineOptions e;
    e.ready_ranges = o.ready_ranges;
    e.size = o.size;
    e.bucket_cap_mb = o.bucket_cap_mb;
    e.label = kLabel;
    e.operation_name = absl::StrCat(codec_->name(), " exchange");
    e.rank = rank_;
    e.operation = [this](int b, int64_t, int64_t) { return RunBucket(b); };
    ASSIGN_OR_RETURN(engine_, BucketEngine::Create(std::move(e)));
    Layout();
    return absl::OkStatus();
  }

  std::string name() const override { return "compressed"; }
  optim::ParamRange owned_range() const override { return {0, size_}; }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }

  std::vector<optim::StateBuffer> extra_state() override {
    AllocateGathered();
    std::vector<optim::StateBuffer> out = {{kMetaName, absl::MakeSpan(meta_)},
                                           {kResidualsName, absl::MakeSpan(gathered_)}};
    if (momentum_correction_) out.push_back({kVelocityName, absl::MakeSpan(gathered_velocity_)});
    return out;
  }
  absl::Status SyncStateToHost() override;
  absl::Status StateLoaded() override;

  absl::Status BeginStep(const StepOptions& options) override {
    RETURN_IF_ERROR(guard_.CheckBegin(options));
    // Rank 0's copy of every rank's state served the checkpoint just written
    // or loaded: give its world x state floats back until the next one.
    if (!gathered_.empty()) std::vector<float>().swap(gathered_);
    if (!gathered_velocity_.empty()) std::vector<float>().swap(gathered_velocity_);
    // Read by the communication thread after the engine's BeginStep (its
    // mutex orders the write before the reads).
    report_ = StepReport{};
    RescaleResiduals(options.grad_scale);
    compress_now_ = steps_done_ >= warmup_steps_;
    seed_step_ = steps_done_;
    residual_sq_ = 0;
    return guard_.Started(engine_->BeginStep(), options);
  }

  void OnGradientsReady(int64_t lo, int64_t hi) override { engine_->OnGradientsReady(lo, hi); }

  StepReport last_step() const override { return report_; }

  absl::Status FinishStep(const optim::StepContext& context) override {
    RETURN_IF_ERROR(guard_.CheckFinish());
    RETURN_IF_ERROR(guard_.Record(engine_->FinishStep()));
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = Update(context, engine_->stats().steps);
    // A skipped step's residuals hold what its non-finite gradients left
    // (inf / NaN in whole chunks): they start again from zero, on every rank
    // (the thresholds are kept).
    if (s.ok() && !report_.applied && feedback_) {
      std::fill(local_.begin(), local_.end() - (thresholds_ != nullptr ? buckets_.size() : 0), 0.f);
      std::fill(velocity_.begin(), velocity_.end(), 0.f);
    }
    const double seconds = SecondsSince(start);
    ++steps_done_;
    absl::MutexLock lock(&mu_);
    optimizer_seconds_ += seconds;
    RETURN_IF_ERROR(guard_.Record(s));
    ++steps_;
    if (feedback_ && compress_now_) residual_norm_ = report_.applied ? std::sqrt(residual_sq_) : 0;
    return absl::OkStatus();
  }

  SyncMemory memory() const override {
    SyncMemory m;
    m.param_bytes = size_ * int64_t{sizeof(float)};
    m.grad_bytes = size_ * int64_t{sizeof(float)};
    m.optimizer_bytes = optimizer_->state_bytes();
    m.staging_bytes = static_cast<int64_t>(send_.size() + recv_.size() + sum_block_.size()) +
                      static_cast<int64_t>(sum_.size() + workspace_.size() + local_.size() +
                                           gathered_.size() + piece_.size() + node_.size() +
                                           share_.size() + velocity_.size() +
                                           gathered_velocity_.size()) *
                          int64_t{sizeof(float)};
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
    s.compress_bytes_before = bytes_before_.load(std::memory_order_relaxed);
    s.compress_bytes_after = bytes_after_.load(std::memory_order_relaxed);
    s.uncompressed_buckets = uncompressed_buckets_.load(std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    s.steps = steps_;
    s.optimizer_seconds = optimizer_seconds_;
    s.residual_norm = residual_norm_;
    return s;
  }

 private:
  void Layout();
  absl::Status RunBucket(int b);
  absl::Status RunDense(int b, const BucketLayout& L);
  // Hierarchical: the node's sum of the bucket, this rank's share of it
  // into share_; and back: every local rank's share into the bucket.
  absl::Status ReduceShare(int b, const BucketLayout& L);
  absl::Status GatherShares(int b, const BucketLayout& L);
  absl::Status RunSparse(int b, const BucketLayout& L);
  absl::Status Update(const optim::StepContext& context, int64_t step);
  // Checkpoint state moves through rank 0 in pieces (rank0_state.h).
  absl::Status GatherOntoRank0(const float* local, int64_t n, float* gathered, const char* what) {
    return sync::GatherOntoRank0(*comm_, kLabel, what, local, n, gathered, piece_.data());
  }
  absl::Status SendBackFromRank0(float* gathered, int64_t n, float* local, const char* what) {
    return sync::SendBackFromRank0(*comm_, kLabel, what, gathered, n, local, piece_.data());
  }
  // Rank 0's copy of every rank's state, made the first time checkpoints
  // need it (not per step): a run that never checkpoints does not hold it.
  // The residuals (and thresholds) are in the units of the gradients as
  // computed: when grad_scale changes between steps (fp16's loss scale
  // halved or doubled, every rank alike) they are multiplied by
  // old / new so they stay in the next step's units (exact for the
  // power-of-two factors loss scaling uses).
  void RescaleResiduals(float grad_scale) {
    if (feedback_ && last_grad_scale_ > 0 && grad_scale != last_grad_scale_ && grad_scale > 0) {
      const float f = last_grad_scale_ / grad_scale;
      const size_t nt = thresholds_ != nullptr ? buckets_.size() : 0;
      for (auto it = local_.begin(); it != local_.end() - nt; ++it) *it *= f;
      for (float& u : velocity_) u *= f;
      if (thresholds_ != nullptr) {
        for (float& t : thresholds_->thresholds()) t *= f;
      }
    }
    last_grad_scale_ = grad_scale;
  }
  void AllocateGathered() {
    if (rank_ == 0 && gathered_.empty()) gathered_.assign(world_size_ * local_.size(), 0.f);
    if (rank_ == 0 && momentum_correction_ && gathered_velocity_.empty()) {
      gathered_velocity_.assign(kVelocityTag + world_size_ * velocity_.size(), 0.f);
    }
  }
  // across_nodes: over a group that spans nodes (the world's, or inter).
  void CountSent(int64_t bytes, bool across_nodes = true) {
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    if (world_spans_nodes_ && across_nodes) {
      inter_node_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    }
  }
  void PutMeta(Meta field, int64_t v) { std::memcpy(&meta_[2 * field], &v, sizeof(v)); }
  int64_t Exchange() const { return sparse_ ? 1 : hier_ ? 2 : 0; }
  int64_t GetMeta(Meta field) const {
    int64_t v;
    std::memcpy(&v, &meta_[2 * field], sizeof(v));
    return v;
  }

  Communicator* const comm_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const std::unique_ptr<Codec> codec_;
  const bool sparse_;
  const bool feedback_;
  const int64_t warmup_steps_;
  const int64_t min_bucket_bytes_;
  const double density_;  // threshold codec's target
  const bool momentum_correction_;
  const float momentum_;
  const bool momentum_masking_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  GradClip clip_;
  const int world_size_;
  const int rank_;
  const bool world_spans_nodes_;
  const bool hier_;               // dense exchange of node shares over inter
  Communicator* const exchange_;  // dense codecs' all-to-all + allgather: world or inter
  Communicator* const intra_;     // hier_ only
  const int ex_size_;
  const int ex_rank_;
  const int local_rank_;
  const int local_size_;
  const std::vector<std::pair<int64_t, int64_t>> ready_ranges_;

  // Fixed in Start (before any step).
  std::vector<BucketLayout> buckets_;
  // This rank's state, one buffer: [gradient residuals | sum residuals |
  // thresholds]; the objects below view into it.
  std::vector<float> local_;
  std::unique_ptr<ErrorFeedback> ef_;      // gradient residuals, by flat offset
  std::unique_ptr<ErrorFeedback> sum_ef_;  // dense: residuals of this rank's sums
  std::unique_ptr<ThresholdController> thresholds_;
  // Momentum correction: the velocity u by flat offset (size_), viewed by ef_.
  std::vector<float> velocity_;
  // Staging (communication thread during steps).
  std::vector<uint8_t> send_, recv_, sum_block_;
  std::vector<float> sum_, workspace_;
  std::vector<float> node_;   // hier_: local ranks x share (the padded bucket)
  std::vector<float> share_;  // hier_: this rank's share of the node's sum
  // Checkpoint state (trainer thread, between steps).
  std::vector<float> meta_ = std::vector<float>(2 * kMetaFields, 0.f);
  std::vector<float> gathered_;  // rank 0, around a checkpoint: world * local_.size()
  // rank 0, around a checkpoint, momentum correction: tag + world * size_
  std::vector<float> gathered_velocity_;
  std::vector<float> piece_;     // world * kStatePiece (or less)

  // Trainer thread; read by the communication thread during a step.
  bool compress_now_ = false;
  int64_t seed_step_ = 0;
  int64_t steps_done_ = 0;  // steps finished, restored from checkpoints
  float last_grad_scale_ = 0;  // the previous step's grad_scale (0: none yet)
  double residual_sq_ = 0;  // communication thread during a step

  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> inter_node_bytes_{0};
  std::atomic<int64_t> bytes_before_{0};
  std::atomic<int64_t> bytes_after_{0};
  std::atomic<int64_t> uncompressed_buckets_{0};

  // Trainer thread only.
  StepGuard guard_{kLabel};
  StepReport report_;

  mutable absl::Mutex mu_;
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  double optimizer_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double residual_norm_ ABSL_GUARDED_BY(mu_) = 0;

  std::unique_ptr<BucketEngine> engine_;  // last: its thread calls into the members above
};

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
  node_.assign(share * local_size_, 0.f);
  share_.assign(share, 0.f);
  piece_.assign(world_size_ * std::min<int64_t>(kStatePiece, local_.size()), 0.f);
}

absl::Status CompressedSync::RunBucket(int b) {
  const BucketLayout& L = buckets_[b];
  constexpr int64_t kFloat = sizeof(float);
  if (!compress_now_ || !L.compress) {
    // Momentum correction: the velocity goes out whole (momentum SGD).
    if (momentum_correction_) ef_->AddMomentum(grads_ + L.lo, L.lo, L.n);
    RETURN_IF_ERROR(comm_->AllReduce(grads_ + L.lo, L.n, ReduceOp::kSum));
    CountSent(L.n * kFloat);
    uncompressed_buckets_.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  return sparse_ ? RunSparse(b, L) : RunDense(b, L);
}

absl::Status CompressedSync::RunDense(int b, const BucketLayout& L) {
  const int W = ex_size_;
  if (hier_) {
    RETURN_IF_ERROR(ReduceShare(b, L));
    // A share every local rank of this index lacks (a bucket smaller than
    // the node): nothing to exchange, on every member of the inter group.
    if (L.x_n == 0) return GatherShares(b, L);
  }
  float* g = hier_ ? share_.data() : grads_ + L.lo;
  int64_t after = 0;
  // Every slice of this rank's x, block j for rank j of the exchange.
  for (int j = 0; j < W; ++j) {
    const int64_t len = SliceLength(L, j);
    EncodeParams p;
    p.seed = CompressedSeed(seed_step_, b, rank_, j, 0);
    uint8_t* out = send_.data() + j * L.block;
    const int64_t at = SliceStart(L, j);
    after += feedback_ ? ef_->Encode(g + at, L.x_lo + at, len, p, out)
                       : codec_->Encode(g + at, len, p, out);
  }
  RETURN_IF_ERROR(exchange_->AllToAll(send_.data(), recv_.data(), L.block));
  // This rank's slice from every rank, summed in fp32 in rank order.
  std::fill(sum_.begin(), sum_.begin() + L.own_len, 0.f);
  for (int i = 0; i < W; ++i) codec_->DecodeAdd(recv_.data() + i * L.block, L.own_len, sum_.data());
  EncodeParams p;
  p.seed = CompressedSeed(seed_step_, b, rank_, ex_rank_, 1);
  after += feedback_ ? sum_ef_->Encode(sum_.data(), L.sum_offset, L.own_len, p, sum_block_.data())
                     : codec_->Encode(sum_.data(), L.own_len, p, sum_block_.data());
  RETURN_IF_ERROR(exchange_->AllGather(sum_block_.data(), send_.data(), L.block));
  for (int j = 0; j < W; ++j) {
    codec_->Decode(send_.data() + j * L.block, SliceLength(L, j), g + SliceStart(L, j));
  }
  CountSent((W + 1) * L.block);
  bytes_before_.fetch_add((L.x_n + L.own_len) * int64_t{sizeof(float)},
                          std::memory_order_relaxed);
  bytes_after_.fetch_add(after, std::memory_order_relaxed);
  if (feedback_) {
    residual_sq_ +=
        ef_->SumOfSquares(L.x_lo, L.x_n) + sum_ef_->SumOfSquares(L.sum_offset, L.own_len);
  }
  return hier_ ? GatherShares(b, L) : absl::OkStatus();
}

absl::Status CompressedSync::ReduceShare(int b, const BucketLayout& L) {
  const float* in = grads_ + L.lo;
  if (L.n != L.share * local_size_) {  // pad to local_size_ equal shares
    std::memcpy(node_.data(), in, L.n * sizeof(float));
    std::fill(node_.begin() + L.n, node_.begin() + L.share * local_size_, 0.f);
    in = node_.data();
  }
  absl::Status s = intra_->ReduceScatter(in, share_.data(), L.share);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(kLabel, ": intra-node reduce-scatter of bucket ",
                                               b, ": ", s.message()));
  }
  CountSent(L.share * local_size_ * int64_t{sizeof(float)}, /*across_nodes=*/false);
  return absl::OkStatus();
}

absl::Status CompressedSync::GatherShares(int b, const BucketLayout& L) {
  const bool even = L.n == L.share * local_size_;
  float* out = even ? grads_ + L.lo : node_.data();
  absl::Status s = intra_->AllGather(share_.data(), out, L.share * int64_t{sizeof(float)});
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(kLabel, ": intra-node allgather of bucket ", b,
                                               ": ", s.message()));
  }
  if (!even) std::memcpy(grads_ + L.lo, node_.data(), L.n * sizeof(float));
  CountSent(L.share * int64_t{sizeof(float)}, /*across_nodes=*/false);
  return absl::OkStatus();
}

absl::Status CompressedSync::RunSparse(int b, const BucketLayout& L) {
  float* g = grads_ + L.lo;
  EncodeParams p;
  p.seed = CompressedSeed(seed_step_, b, rank_, 0, 0);
  p.workspace = workspace_.data();
  if (thresholds_ != nullptr) p.threshold = thresholds_->threshold(b);
  const int64_t after = feedback_ ? ef_->Encode(g, L.lo, L.n, p, send_.data())
                                  : codec_->Encode(g, L.n, p, send_.data());
  if (thresholds_ != nullptr) thresholds_->Update(b, send_.data(), L.n);
  RETURN_IF_ERROR(comm_->AllGather(send_.data(), recv_.data(), L.block));
  std::fill(g, g + L.n, 0.f);
  for (int i = 0; i < world_size_; ++i) codec_->DecodeAdd(recv_.data() + i * L.block, L.n, g);
  CountSent(L.block);
  bytes_before_.fetch_add(L.n * int64_t{sizeof(float)}, std::memory_order_relaxed);
  bytes_after_.fetch_add(after, std::memory_order_relaxed);
  if (feedback_) residual_sq_ += ef_->SumOfSquares(L.lo, L.n);
  return absl::OkStatus();
}

// As AllreduceSync: every rank holds the same summed gradients, so every
// rank computes the same scale, clip factor and update.
absl::Status CompressedSync::Update(const optim::StepContext& context, int64_t step) {
  const OwnedShard whole{kLabel, rank_, world_size_, &clip_, {0, size_}, &ready_ranges_,
                         grads_, params_, optimizer_.get(), nullptr};
  return StepOwnedShard(whole, context, step, guard_.grad_scale(), guard_.options(), &report_);
}

// Every rank's local state, piece by piece, onto rank 0.
absl::Status CompressedSync::SyncStateToHost() {
  RETURN_IF_ERROR(guard_.CheckUsable("SyncStateToHost"));
  AllocateGathered();
  const int64_t n = local_.size();
  if (thresholds_ != nullptr) {
    absl::Span<const float> t = thresholds_->thresholds();
    std::copy(t.begin(), t.end(), local_.end() - t.size());
  }
  RETURN_IF_ERROR(GatherOntoRank0(local_.data(), n, gathered_.data(), "residuals"));
  if (momentum_correction_) {
    RETURN_IF_ERROR(GatherOntoRank0(velocity_.data(), size_,
                                    rank_ == 0 ? gathered_velocity_.data() + kVelocityTag : nullptr,
                                    "momentum-correction velocity"));
    if (rank_ == 0) std::memcpy(gathered_velocity_.data(), &kVelocityMagic, sizeof(kVelocityMagic));
  }
  if (rank_ == 0) {
    PutMeta(kMagicField, kMagic);
    PutMeta(kWorld, world_size_);
    PutMeta(kSize, size_);
    PutMeta(kLocal, n);
    PutMeta(kBuckets, static_cast<int64_t>(buckets_.size()));
    PutMeta(kSteps, steps_done_);
    PutMeta(kExchange, Exchange());
  }
  return absl::OkStatus();
}

// Rank 0 holds what the checkpoint had; it checks that it fits and sends
// each rank its own piece.
absl::Status CompressedSync::StateLoaded() {
  RETURN_IF_ERROR(guard_.CheckUsable("StateLoaded"));
  AllocateGathered();
  const int64_t n = local_.size();
  int64_t header[3] = {0, 0, 0};  // residuals fit, steps done, velocity saved
  if (rank_ == 0) {
    const bool saved = GetMeta(kMagicField) == kMagic;
    const bool fits = saved && GetMeta(kWorld) == world_size_ && GetMeta(kSize) == size_ &&
                      GetMeta(kLocal) == n &&
                      GetMeta(kBuckets) == static_cast<int64_t>(buckets_.size()) &&
                      GetMeta(kExchange) == Exchange();
    header[0] = fits ? 1 : 0;
    header[1] = saved ? GetMeta(kSteps) : 0;
    if (!saved) {
      LOG(INFO) << kLabel << ": no saved compression state (a fresh start, or a checkpoint of "
                << "another strategy): error-feedback residuals start from zero";
    } else if (!fits) {
      LOG(WARNING) << kLabel << ": the checkpoint's residuals were saved at world size "
                   << GetMeta(kWorld) << " with " << GetMeta(kBuckets) << " buckets ("
                   << GetMeta(kLocal) << " values per rank); this run has world size "
                   << world_size_ << ", " << buckets_.size() << " buckets (" << n
                   << "): error-feedback residuals reset to zero";
    }
    if (momentum_correction_) {
      // The checkpointer fills a blob that does not fit (another world
      // size) with zeros: no tag.
      int64_t tag = 0;
      std::memcpy(&tag, gathered_velocity_.data(), sizeof(tag));
      header[2] = tag == kVelocityMagic ? 1 : 0;
      if (header[2] == 0) {
        LOG(INFO) << kLabel << ": no saved momentum-correction velocity of world size "
                  << world_size_ << " x " << size_ << " values (a fresh start, a checkpoint "
                  << "written without momentum_correction, or at another world size): the "
                  << "velocity starts from zero";
      }
    }
  }
  RETURN_IF_ERROR(Annotate(comm_->Broadcast(header, sizeof(header), 0),
                           absl::StrCat(kLabel, ": sending the checkpoint's state from rank 0")));
  if (header[0] == 1) {
    RETURN_IF_ERROR(SendBackFromRank0(gathered_.data(), n, local_.data(), "residuals"));
  } else {
    std::fill(local_.begin(), local_.end(), 0.f);
  }
  if (momentum_correction_ && header[2] == 1) {
    RETURN_IF_ERROR(SendBackFromRank0(rank_ == 0 ? gathered_velocity_.data() + kVelocityTag
                                                 : nullptr,
                                      size_, velocity_.data(), "momentum-correction velocity"));
  } else {
    std::fill(velocity_.begin(), velocity_.end(), 0.f);
  }
  if (thresholds_ != nullptr) {
    const float* saved = local_.data() + (local_.size() - buckets_.size());
    std::copy(saved, saved + buckets_.size(), thresholds_->thresholds().begin());
  }
  steps_done_ = header[1];
  return absl::OkStatus();
}

}  // namespace

uint64_t CompressedSeed(int64_t step, int bucket, int rank, int slice, int stage) {
  uint64_t h = Mix64(static_cast<uint64_t>(step) + 0x9e3779b97f4a7c15ull);
  h = Mix64(h ^ (static_cast<uint64_t>(bucket) << 32 | static_cast<uint32_t>(rank)));
  return Mix64(h ^ (static_cast<uint64_t>(slice) << 8 | static_cast<uint64_t>(stage)));
}

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
