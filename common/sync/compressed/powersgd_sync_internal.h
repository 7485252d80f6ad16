// PowerSgdSync (powersgd_sync.h), declared for the files that define its
// parts (private to :powersgd_sync; others use CreatePowerSgdSync):
//   powersgd_sync.cc   creation checks, the layout, the step, one bucket
//   powersgd_state.cc  checkpointed state (Q, residuals) through rank 0
// Thread-safety as in powersgd_sync.h: the step from the trainer thread,
// each bucket's operation on the engine's communication thread.
#ifndef TANDEM_COMMON_SYNC_COMPRESSED_POWERSGD_SYNC_INTERNAL_H_
#define TANDEM_COMMON_SYNC_COMPRESSED_POWERSGD_SYNC_INTERNAL_H_

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common/sync/bucket/bucket_engine.h"
#include "common/sync/compressed/compression_stats.h"
#include "common/sync/compressed/powersgd_sync.h"
#include "common/sync/grad_clip.h"
#include "common/sync/step_guard.h"

namespace tandem {
namespace sync {
namespace powersgd_internal {

constexpr char kLabel[] = "compressed sync (powersgd)";
constexpr char kMetaName[] = "powersgd/meta";
constexpr char kQName[] = "powersgd/q";
constexpr char kResidualsName[] = "powersgd/residuals";
// "TDMP" + layout version: tells saved state from zeros.
constexpr int64_t kMagic = 0x54444d50'00000001;
// Meta fields (int64, stored in a float buffer bit for bit).
enum Meta { kMagicField, kWorld, kSize, kRank, kQFloats, kResidualFloats, kSteps, kMetaFields };

// One compressed weight: rows x cols at flat offset lo; its factors at
// p_at in the bucket's P buffer and q_at in the Q state; its residual at
// res_at in the residuals.
struct PsgdMatrix {
  int64_t lo = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t p_at = 0;
  int64_t q_at = 0;
  int64_t res_at = 0;
};

// One bucket: its matrices, the flat segments sent uncompressed (with the
// Ps, after them in the P buffer), and its slice of the Q state.
struct PsgdBucket {
  std::vector<PsgdMatrix> matrices;
  std::vector<std::pair<int64_t, int64_t>> dense;  // [lo, hi) in the flat vector
  int64_t p_floats = 0;
  int64_t dense_floats = 0;
  int64_t q_lo = 0;
  int64_t q_floats = 0;
};

class PowerSgdSync final : public GradientSync {
 public:
  PowerSgdSync(const PowerSgdSyncOptions& o, std::unique_ptr<optim::Optimizer> optimizer,
               GradClip clip);

  // Second phase: the engine's operation captures `this`; the buffers are
  // sized from its plan.
  absl::Status Start(const PowerSgdSyncOptions& o);

  std::string name() const override { return "compressed"; }
  optim::ParamRange owned_range() const override { return {0, size_}; }
  optim::Optimizer* optimizer() override { return optimizer_.get(); }
  std::vector<optim::StateBuffer> extra_state() override;
  absl::Status SyncStateToHost() override;
  absl::Status StateLoaded() override;
  absl::Status BeginStep(const StepOptions& options) override;
  void OnGradientsReady(int64_t lo, int64_t hi) override { engine_->OnGradientsReady(lo, hi); }
  StepReport last_step() const override { return report_; }
  absl::Status FinishStep(const optim::StepContext& context) override;
  SyncMemory memory() const override;
  SyncStats stats() const override { return stats_.Get(engine_->stats()); }

  // How many weights compress (for the creation log and checks).
  int64_t compressed_matrices() const { return compressed_matrices_; }

 private:
  void Layout(const std::vector<ParamShape>& shapes);
  absl::Status RunBucket(int b, int64_t lo, int64_t hi);
  absl::Status Compress(int b, const PsgdBucket& B);
  void ResetState();  // residuals 0, Q its seeded start
  void AllocateGathered() {
    if (rank_ == 0 && gathered_.empty()) gathered_.assign(world_size_ * residuals_.size(), 0.f);
  }
  void PutMeta(Meta field, int64_t v) { std::memcpy(&meta_[2 * field], &v, sizeof(v)); }
  int64_t GetMeta(Meta field) const {
    int64_t v;
    std::memcpy(&v, &meta_[2 * field], sizeof(v));
    return v;
  }

  Communicator* const comm_;
  float* const params_;
  float* const grads_;
  const int64_t size_;
  const int r_;
  const int64_t warmup_steps_;
  const double min_compression_;
  const bool compress_embeddings_;
  const bool feedback_;
  const uint64_t seed_;
  const std::unique_ptr<optim::Optimizer> optimizer_;
  GradClip clip_;
  const int world_size_;
  const int rank_;
  const bool world_spans_nodes_;
  const std::vector<std::pair<int64_t, int64_t>> ready_ranges_;

  // Fixed in Start (before any step).
  std::vector<PsgdBucket> buckets_;
  int64_t compressed_matrices_ = 0;
  std::vector<float> q_;          // every matrix's Qt (r x cols), bucket by bucket
  std::vector<float> residuals_;  // every matrix's residual (rows x cols)
  std::vector<float> p_;          // staging: the largest bucket's Ps + dense values
  // Checkpoint state (trainer thread, between steps).
  std::vector<float> meta_ = std::vector<float>(2 * kMetaFields, 0.f);
  std::vector<float> gathered_;  // rank 0, around a checkpoint: world x residuals
  std::vector<float> piece_;

  // Trainer thread; read by the communication thread during a step.
  bool compress_now_ = false;
  int64_t steps_done_ = 0;
  float last_grad_scale_ = 0;
  double residual_sq_ = 0;  // communication thread during a step

  CompressionStats stats_{world_spans_nodes_};

  // Trainer thread only.
  StepGuard guard_{kLabel};
  StepReport report_;

  std::unique_ptr<BucketEngine> engine_;  // last: its thread calls into the members above
};

}  // namespace powersgd_internal
}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_COMPRESSED_POWERSGD_SYNC_INTERNAL_H_
