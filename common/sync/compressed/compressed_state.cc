// The compressed strategy's checkpointed state (residuals, thresholds,
// momentum-correction velocity) gathered onto rank 0 and sent back.
#include "common/sync/compressed/compressed_sync_internal.h"

namespace tandem {
namespace sync {
namespace compressed_internal {

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

}  // namespace compressed_internal

}  // namespace sync
}  // namespace tandem
