// CompressedSync, the `compressed` strategy's GradientSync, declared for the
// files that define its parts (private to :compressed_sync; others use
// CreateCompressedSync in compressed_sync.h):
//   compressed_sync.cc      creation checks, the bucket layout, the step
//   compressed_exchange.cc  one bucket's exchange (dense, hierarchical, sparse)
//   compressed_state.cc     checkpointed compression state through rank 0
// Thread-safety as in compressed_sync.h: the step from the trainer thread,
// each bucket's exchange on the engine's communication thread.
#ifndef TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_SYNC_INTERNAL_H_
#define TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_SYNC_INTERNAL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/codec/error_feedback.h"
#include "common/codec/threshold_controller.h"
#include "common/log/log.h"
#include "common/optim/clip.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/hier_allreduce.h"
#include "common/sync/allreduce/node_shares.h"
#include "common/sync/bucket/bucket_engine.h"
#include "common/sync/compressed/compressed_sync.h"
#include "common/sync/compressed/compression_stats.h"
#include "common/sync/grad_check.h"
#include "common/sync/grad_clip.h"
#include "common/sync/rank0_state.h"
#include "common/sync/step_guard.h"
#include "common/sync/step_owned_shard.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace sync {
namespace compressed_internal {

using codec::Codec;
using codec::CreateCodec;
using codec::EncodeParams;
using codec::ErrorFeedback;
using codec::ThresholdController;
using codec::ThresholdControllerOptions;

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

inline int64_t Align8(int64_t bytes) { return (bytes + 7) / 8 * 8; }

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

inline int64_t SliceLength(const BucketLayout& b, int j) {
  return std::clamp<int64_t>(b.x_n - j * b.slice, 0, b.slice);
}

// Where slice j starts in x (an empty slice starts at x's end).
inline int64_t SliceStart(const BucketLayout& b, int j) { return std::min(j * b.slice, b.x_n); }

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
    ++steps_done_;
    const bool gauge = feedback_ && compress_now_;
    stats_.StepFinished(SecondsSince(start), s.ok(),
                        !gauge ? -1 : report_.applied ? std::sqrt(residual_sq_) : 0);
    return guard_.Record(s);
  }

  SyncMemory memory() const override {
    SyncMemory m;
    m.param_bytes = size_ * int64_t{sizeof(float)};
    m.grad_bytes = size_ * int64_t{sizeof(float)};
    m.optimizer_bytes = optimizer_->state_bytes();
    m.staging_bytes = static_cast<int64_t>(send_.size() + recv_.size() + sum_block_.size()) +
                      static_cast<int64_t>(sum_.size() + workspace_.size() + local_.size() +
                                           gathered_.size() + piece_.size() + velocity_.size() +
                                           gathered_velocity_.size()) *
                          int64_t{sizeof(float)} +
                      (shares_ != nullptr ? shares_->staging_bytes() : 0);
    return m;
  }

  SyncStats stats() const override { return stats_.Get(engine_->stats()); }

 private:
  void Layout();
  absl::Status RunBucket(int b);
  absl::Status RunDense(int b, const BucketLayout& L);
  // Hierarchical: the node's sum of the bucket, this rank's share of it
  // into shares_->share(); and back: every local rank's share into the
  // bucket (NodeShares, with this strategy's error messages and counts).
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
  // hier_: the node's sum of this rank's share of a bucket, and back.
  std::unique_ptr<NodeShares> shares_;
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

  CompressionStats stats_{world_spans_nodes_};

  // Trainer thread only.
  StepGuard guard_{kLabel};
  StepReport report_;

  std::unique_ptr<BucketEngine> engine_;  // last: its thread calls into the members above
};

}  // namespace compressed_internal
}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_SYNC_INTERNAL_H_
