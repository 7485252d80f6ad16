// The hybrid strategy's checkpoint state: the servers' optimizer state and
// server-side saves, compress=int8's residuals through rank 0 and the
// resync to the servers' fp32 master.
#include "common/sync/remote/hybrid_sync_internal.h"

namespace tandem {
namespace sync {
namespace hybrid_internal {

absl::Status HybridSyncImpl::SyncStateToHost() {
  RETURN_IF_ERROR(WaitLanded());
  if (feedback_ != nullptr) {
    absl::Status s = GatherResiduals();
    if (!s.ok()) return Fail(s);
  }
  if (!step_.initialised()) {
    // Nothing stepped in this generation: the state is what was restored.
    if (ring_ != nullptr && world_->rank() == 0) ring_->FillForCheckpoint(servers_->mirror());
    return absl::OkStatus();
  }
  if (codec_ != nullptr) {
    absl::Status s = ResyncToMaster();
    if (!s.ok()) return Fail(s);
  }
  absl::Status s = servers_->FetchForCheckpoint(world_->rank(), step_.next_step() - 1);
  if (!s.ok()) return Fail(s);
  // The ring part's state (every rank holds it) in front of the servers'.
  if (ring_ != nullptr && world_->rank() == 0) ring_->FillForCheckpoint(servers_->mirror());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SavedShard>> HybridSyncImpl::SaveOnServers(const ServerSaveRequest& r) {
  RETURN_IF_ERROR(WaitLanded());
  absl::StatusOr<std::vector<SavedShard>> s = servers_->SaveOnServers(r, step_.next_step() - 1);
  if (!s.ok()) return Fail(s.status());
  return s;
}

absl::StatusOr<ServerSideCheckpoint::ServerWrite> HybridSyncImpl::SnapshotOnServers(
    const ServerSaveRequest& r) {
  absl::StatusOr<ServerWrite> w = servers_->SnapshotOnServers(r, step_.next_step() - 1);
  if (!w.ok()) return Fail(w.status());
  return w;
}

absl::Status HybridSyncImpl::StateLoaded() {
  RETURN_IF_ERROR(WaitLanded());
  // The restored whole state apart: the ring part here, the rest for the
  // servers (rank 0 sends it with InitServers).
  if (ring_ != nullptr) ring_->Loaded(world_->rank(), servers_->mirror());
  servers_->Loaded(world_->rank());
  step_.Loaded();
  if (feedback_ != nullptr) {
    absl::Status s = ScatterResiduals();
    if (!s.ok()) return Fail(s);
  }
  return absl::OkStatus();
}

std::vector<optim::StateBuffer> HybridSyncImpl::extra_state() {
  if (feedback_ == nullptr) return {};
  AllocateGathered();
  return {{kMetaName, absl::MakeSpan(meta_)}, {kResidualsName, absl::MakeSpan(gathered_)}};
}

absl::Status HybridSyncImpl::ResyncToMaster() {
  const int64_t step = step_.next_step() - 1;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int mine = groups_[g].first + local_rank_;
    if (mine < groups_[g].end) remote_->Pull(mine, step, params_, /*reset_delta_reference=*/true);
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    absl::Status s = GatherGroup(static_cast<int>(g), step, /*delta=*/false);
    if (!s.ok()) {
      (void)remote_->WaitAllPulls();
      return s;
    }
  }
  return remote_->WaitAllPulls();
}

absl::Status HybridSyncImpl::GatherResiduals() {
  AllocateGathered();
  const int world = world_->world_size();
  const absl::Span<float> mine = feedback_->residuals();
  RETURN_IF_ERROR(GatherOntoRank0(*world_, kLabel, "residuals", mine.data(), size_,
                                  gathered_.data(), piece_.data()));
  if (world_->rank() == 0) {
    PutMeta(kMagicField, kMagic);
    PutMeta(kWorld, world);
    PutMeta(kSize, size_);
    PutMeta(kInt8ChunkField, int8_chunk_);
  }
  return absl::OkStatus();
}

absl::Status HybridSyncImpl::ScatterResiduals() {
  AllocateGathered();
  const int world = world_->world_size();
  const int rank = world_->rank();
  int64_t fits = 0;
  if (rank == 0) {
    const bool saved = GetMeta(kMagicField) == kMagic;
    fits = saved && GetMeta(kWorld) == world && GetMeta(kSize) == size_ &&
           GetMeta(kInt8ChunkField) == int8_chunk_;
    if (!saved) {
      LOG(INFO) << kLabel << ": no saved compression state (a fresh start, or a checkpoint of "
                << "another strategy or of compress=none): error-feedback residuals start from "
                << "zero";
    } else if (!fits) {
      LOG(WARNING) << kLabel << ": the checkpoint's residuals were saved at world size "
                   << GetMeta(kWorld) << ", " << GetMeta(kSize) << " values, int8 chunk "
                   << GetMeta(kInt8ChunkField) << "; this run has " << world << ", " << size_
                   << ", " << int8_chunk_ << ": error-feedback residuals reset to zero";
    }
  }
  absl::Status s = world_->Broadcast(&fits, sizeof(fits), 0);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(kLabel, ": sending the checkpoint's residuals "
                                               "from rank 0: ", s.message()));
  }
  if (fits != 1) {
    feedback_->Reset();
    return absl::OkStatus();
  }
  return SendBackFromRank0(*world_, kLabel, "residuals", gathered_.data(), size_,
                           feedback_->residuals().data(), piece_.data());
}

}  // namespace hybrid_internal

}  // namespace sync
}  // namespace tandem
