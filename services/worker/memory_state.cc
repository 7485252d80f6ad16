#include "services/worker/memory_state.h"

#include <algorithm>
#include <cstring>

#include "common/io/crc32c.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/remote/server_side_checkpoint.h"
#include "services/worker/peer_restore.h"

namespace tandem {
namespace worker {
namespace {

// What each rank contributes to the agreement.
enum Field { kStep, kEpoch, kSamples, kChecksum, kReached, kFields };

}  // namespace

bool MemoryState::Replicated(Generation& g, int64_t total_params) {
  const optim::ParamRange owned = g.sync->owned_range();
  return g.sync->optimizer() != nullptr && owned.lo == 0 && owned.hi == total_params &&
         g.sync->param_hook() == nullptr &&
         dynamic_cast<sync::ServerSideCheckpoint*>(g.sync.get()) == nullptr;
}

uint32_t MemoryState::ParamsChecksum() {
  tensor::FlatStorage& storage = model_->storage();
  const size_t bytes = storage.size() * sizeof(float);
  if (backend_->host_accessible()) return Crc32c(storage.params(), bytes);
  host_.resize(storage.size());
  if (!backend_->CopyToHost(host_.data(), storage.params(), bytes).ok()) return 0;
  return Crc32c(host_.data(), bytes);
}

void MemoryState::Retain(Generation& g, int64_t step, int64_t epoch, int64_t samples_in_epoch) {
  if (!live_) return;  // this generation never held the state: keep what was kept
  live_ = false;
  reached_ = step;
  step_ = -1;
  if (!enabled_ || g.sync == nullptr || !Replicated(g, model_->storage().size())) return;
  if (g.sync->partially_updated()) return;  // a failed per-bucket step: no step's state
  // Device-resident optimizer state to its host buffers (allreduce and hier
  // do this without a collective; compressed is host-only).
  if (!backend_->host_accessible() && !g.sync->SyncStateToHost().ok()) return;
  const std::vector<optim::StateBuffer> buffers = g.sync->optimizer()->state();
  optimizer_.resize(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    optimizer_[i].assign(buffers[i].data.begin(), buffers[i].data.end());
  }
  checksum_ = ParamsChecksum();
  step_ = step;
  epoch_ = epoch;
  samples_in_epoch_ = samples_in_epoch;
}

// The kept optimizer state has this generation's optimizer's buffers.
bool MemoryState::Fits(Generation& g) const {
  const std::vector<optim::StateBuffer> buffers = g.sync->optimizer()->state();
  if (buffers.size() != optimizer_.size()) return false;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].data.size() != optimizer_[i].size()) return false;
  }
  return true;
}

absl::StatusOr<MemoryRecovery> MemoryState::TryRestore(Generation& g, int64_t committed_step) {
  const int world = g.world();
  const bool usable =
      enabled_ && Replicated(g, model_->storage().size()) && step_ >= 0 && Fits(g);
  const int64_t mine[kFields] = {usable ? step_ : -1, epoch_, samples_in_epoch_,
                                 static_cast<int64_t>(checksum_), reached_};
  std::vector<int64_t> all(static_cast<size_t>(world) * kFields);
  RETURN_IF_ERROR(g.ctl->AllGather(mine, all.data(), sizeof(mine)));
  auto at = [&](int r, Field f) { return all[static_cast<size_t>(r) * kFields + f]; };
  MemoryRecovery out;
  int64_t best = -1;
  for (int r = 0; r < world; ++r) {
    out.reached = std::max(out.reached, at(r, kReached));
    if (at(r, kStep) > best) {
      best = at(r, kStep);
      out.source = r;
    }
  }
  if (best < 0 || best < committed_step) {
    RETURN_IF_ERROR(TryPeers(g, committed_step, &out));
    return out;
  }
  out.restored = true;
  out.step = best;
  out.epoch = at(out.source, kEpoch);
  out.samples_in_epoch = at(out.source, kSamples);
  bool keep_mine = false;
  for (int r = 0; r < world; ++r) {
    const bool keep = at(r, kStep) == best && at(r, kChecksum) == at(out.source, kChecksum);
    if (!keep) ++out.received;
    if (r == g.rank()) keep_mine = keep;
  }
  if (keep_mine) {
    std::vector<optim::StateBuffer> buffers = g.sync->optimizer()->state();
    for (size_t i = 0; i < buffers.size(); ++i) {
      std::copy(optimizer_[i].begin(), optimizer_[i].end(), buffers[i].data.begin());
    }
  }
  if (out.received > 0) RETURN_IF_ERROR(Receive(g, out.source, keep_mine));
  return out;
}

absl::Status MemoryState::TryPeers(Generation& g, int64_t committed_step, MemoryRecovery* out) {
  // Also at world 1 (zero1 then owns everything): the replicas are of the
  // previous, sharded generation.
  const bool sharded = enabled_ && peers_.every() > 0 && g.sync->optimizer() != nullptr &&
                       dynamic_cast<sync::ServerSideCheckpoint*>(g.sync.get()) == nullptr;
  if (!sharded) {
    peers_.Clear();
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const PeerRecovery p,
                   RestoreFromPeers(g, peers_, backend_, model_, committed_step));
  if (!p.restored) {
    // The disk's state is another trajectory than the replicas'.
    peers_.Clear();
    out->not_from_peers = p.reason;
    return absl::OkStatus();
  }
  peers_.DropAfter(p.step);
  out->restored = true;
  out->from_peers = true;
  out->step = p.step;
  out->epoch = p.epoch;
  out->samples_in_epoch = p.samples_in_epoch;
  out->source = p.source;
  out->received = p.sent_by_neighbours;
  return absl::OkStatus();
}

// The source's parameters and optimizer state to every rank (whole
// buffers: every rank holds them all anyway).
absl::Status MemoryState::Receive(Generation& g, int source, bool keep) {
  if (!keep) Invalidate();
  tensor::FlatStorage& storage = model_->storage();
  const int64_t bytes = storage.size() * sizeof(float);
  if (backend_->host_accessible()) {
    RETURN_IF_ERROR(g.ctl->Broadcast(storage.params(), bytes, source));
  } else {
    host_.resize(storage.size());
    RETURN_IF_ERROR(backend_->CopyToHost(host_.data(), storage.params(), bytes));
    RETURN_IF_ERROR(g.ctl->Broadcast(host_.data(), bytes, source));
    RETURN_IF_ERROR(backend_->CopyToDevice(storage.params(), host_.data(), bytes));
  }
  for (optim::StateBuffer& b : g.sync->optimizer()->state()) {
    RETURN_IF_ERROR(g.ctl->Broadcast(b.data.data(),
                                     static_cast<int64_t>(b.data.size() * sizeof(float)), source));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
