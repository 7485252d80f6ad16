// PowerSGD's checkpointed state: Q (the same on every rank: rank 0's is
// saved and broadcast back) and every rank's residuals, gathered onto rank
// 0 and sent back (rank0_state.h).
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/compressed/powersgd_sync_internal.h"
#include "common/sync/rank0_state.h"

namespace tandem {
namespace sync {
namespace powersgd_internal {

std::vector<optim::StateBuffer> PowerSgdSync::extra_state() {
  AllocateGathered();
  return {{kMetaName, absl::MakeSpan(meta_)},
          {kQName, absl::MakeSpan(q_)},
          {kResidualsName, absl::MakeSpan(gathered_)}};
}

absl::Status PowerSgdSync::SyncStateToHost() {
  RETURN_IF_ERROR(guard_.CheckUsable("SyncStateToHost"));
  AllocateGathered();
  RETURN_IF_ERROR(GatherOntoRank0(*comm_, kLabel, "residuals", residuals_.data(),
                                  static_cast<int64_t>(residuals_.size()), gathered_.data(),
                                  piece_.data()));
  if (rank_ == 0) {
    PutMeta(kMagicField, kMagic);
    PutMeta(kWorld, world_size_);
    PutMeta(kSize, size_);
    PutMeta(kRank, r_);
    PutMeta(kQFloats, static_cast<int64_t>(q_.size()));
    PutMeta(kResidualFloats, static_cast<int64_t>(residuals_.size()));
    PutMeta(kSteps, steps_done_);
  }
  return absl::OkStatus();
}

// Rank 0 holds what the checkpoint had (the others zeros): it decides what
// fits and every rank takes Q, its residuals and the step count from it.
absl::Status PowerSgdSync::StateLoaded() {
  RETURN_IF_ERROR(guard_.CheckUsable("StateLoaded"));
  AllocateGathered();
  int64_t header[3] = {0, 0, 0};  // Q fits, residuals fit, steps done
  if (rank_ == 0) {
    const bool saved = GetMeta(kMagicField) == kMagic;
    const bool q_fits = saved && GetMeta(kSize) == size_ && GetMeta(kRank) == r_ &&
                        GetMeta(kQFloats) == static_cast<int64_t>(q_.size());
    const bool res_fits = q_fits && GetMeta(kWorld) == world_size_ &&
                          GetMeta(kResidualFloats) == static_cast<int64_t>(residuals_.size());
    header[0] = q_fits ? 1 : 0;
    header[1] = res_fits ? 1 : 0;
    header[2] = saved ? GetMeta(kSteps) : 0;
    if (!saved) {
      LOG(INFO) << kLabel << ": no saved PowerSGD state (a fresh start, or a checkpoint of "
                << "another strategy or codec): Q starts from its seed, residuals from zero";
    } else if (!res_fits) {
      LOG(WARNING) << kLabel << ": the checkpoint's PowerSGD state was saved at world size "
                   << GetMeta(kWorld) << ", rank " << GetMeta(kRank) << "; this run has world "
                   << "size " << world_size_ << ", rank " << r_ << ": residuals reset to zero"
                   << (q_fits ? " (Q kept)" : ", Q restarts from its seed");
    }
  }
  RETURN_IF_ERROR(Annotate(comm_->Broadcast(header, sizeof(header), 0),
                           absl::StrCat(kLabel, ": sending the checkpoint's state from rank 0")));
  if (header[0] == 1) {
    RETURN_IF_ERROR(Annotate(comm_->Broadcast(q_.data(), q_.size() * sizeof(float), 0),
                             absl::StrCat(kLabel, ": broadcasting Q from rank 0")));
  } else {
    ResetState();
  }
  if (header[1] == 1) {
    RETURN_IF_ERROR(SendBackFromRank0(*comm_, kLabel, "residuals", gathered_.data(),
                                      static_cast<int64_t>(residuals_.size()), residuals_.data(),
                                      piece_.data()));
  } else {
    std::fill(residuals_.begin(), residuals_.end(), 0.f);
  }
  steps_done_ = header[2];
  return absl::OkStatus();
}

}  // namespace powersgd_internal
}  // namespace sync
}  // namespace tandem
