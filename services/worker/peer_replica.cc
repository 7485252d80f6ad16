#include "services/worker/peer_replica.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/remote/server_side_checkpoint.h"

namespace tandem {
namespace worker {

bool PeerReplica::Sharded(Generation& g, int64_t total_params) {
  if (g.sync == nullptr || g.sync->optimizer() == nullptr || g.world() < 2) return false;
  const optim::ParamRange owned = g.sync->owned_range();
  return !(owned.lo == 0 && owned.hi == total_params) &&
         dynamic_cast<sync::ServerSideCheckpoint*>(g.sync.get()) == nullptr;
}

absl::Status PeerReplica::MaybeSnapshot(Generation& g, int64_t step, int64_t epoch,
                                        int64_t samples_in_epoch) {
  if (o_.every <= 0 || step <= 0 || step % o_.every != 0) return absl::OkStatus();
  if (!Sharded(g, model_->storage().size())) return absl::OkStatus();
  if (link_ == nullptr || link_generation_ != g.join.generation()) {
    StopLink();  // the previous generation's neighbours
    ASSIGN_OR_RETURN(link_, PeerLink::Start(*g.ctl, o_.link, this));
    link_generation_ = g.join.generation();
  }
  // Device optimizer state (and zero1/2's overlapped gather) settle first
  // (on every rank alike: for some strategies it could be collective).
  RETURN_IF_ERROR(g.sync->SyncStateToHost());
  if (sending_) {
    // Started K steps ago: normally long done. Still going (a neighbour
    // that stalls): this step gets no replica rather than the step waiting
    // (the slot in flight is the one the next snapshot would overwrite).
    // A failure loses that one copy (the neighbour holds the one before).
    absl::Status sent;
    if (!link_->Done(&sent)) {
      LOG(WARNING) << "rank " << g.rank() << ": the previous peer replica is still being sent; "
                   << "no replica at step " << step;
      return absl::OkStatus();
    }
    if (!sent.ok()) {
      LOG(WARNING) << "rank " << g.rank() << ": peer replica not held by the next rank: "
                   << sent.message();
    }
    sending_ = false;
  }
  const optim::ParamRange owned = g.sync->owned_range();
  const int64_t size = owned.size();
  const std::vector<optim::StateBuffer> buffers = g.sync->optimizer()->state();
  ReplicaSlot& s = own_[next_];
  next_ ^= 1;
  s.meta = ReplicaMeta{};  // valid again only once whole
  s.data.resize(static_cast<size_t>(size) * (1 + buffers.size()));
  RETURN_IF_ERROR(backend_->CopyToHost(s.data.data(), model_->storage().params() + owned.lo,
                                       size * sizeof(float)));
  for (size_t b = 0; b < buffers.size(); ++b) {
    DCHECK_EQ(static_cast<int64_t>(buffers[b].data.size()), size);
    std::copy(buffers[b].data.begin(), buffers[b].data.end(), s.data.begin() + (b + 1) * size);
  }
  s.meta = ReplicaMeta{g.join.generation(), g.rank(), g.world(), step, epoch,
                       samples_in_epoch,    owned.lo,  owned.hi};
  PeerFrameHeader header;
  std::memcpy(header.data(), &s.meta, sizeof(s.meta));
  link_->Send(header, reinterpret_cast<const char*>(s.data.data()), s.data.size() * sizeof(float));
  sending_ = true;
  if (o_.synchronous) {
    if (absl::Status sent = link_->WaitSent(); !sent.ok()) {
      LOG(WARNING) << "rank " << g.rank() << ": peer replica not held by the next rank: "
                   << sent.message();
    }
    sending_ = false;
  }
  return absl::OkStatus();
}

void PeerReplica::StopLink() {
  link_.reset();  // joins both threads; a send in flight is abandoned
  link_generation_ = -1;
  sending_ = false;
}

void PeerReplica::Clear() {
  StopLink();
  for (ReplicaSlot& s : own_) s.meta = ReplicaMeta{};
  absl::MutexLock lock(&mu_);
  held_.meta = ReplicaMeta{};
  incoming_.meta = ReplicaMeta{};
}

void PeerReplica::DropAfter(int64_t step) {
  StopLink();
  for (ReplicaSlot& s : own_) {
    if (s.meta.step > step) s.meta = ReplicaMeta{};
  }
  absl::MutexLock lock(&mu_);
  if (held_.meta.step > step) held_.meta = ReplicaMeta{};
}

int64_t PeerReplica::bytes() const {
  absl::MutexLock lock(&mu_);
  const size_t floats = own_[0].data.capacity() + own_[1].data.capacity() +
                        held_.data.capacity() + incoming_.data.capacity();
  return static_cast<int64_t>(floats * sizeof(float));
}

char* PeerReplica::Begin(const PeerFrameHeader& header, uint64_t bytes) {
  ReplicaMeta meta;
  std::memcpy(&meta, header.data(), sizeof(meta));
  const uint64_t floats = bytes / sizeof(float);
  // Anything that is not a shard of this model is refused (read and dropped).
  if (bytes % sizeof(float) != 0 || meta.lo < 0 || meta.hi <= meta.lo ||
      meta.hi > model_->storage().size() || floats % static_cast<uint64_t>(meta.hi - meta.lo) != 0) {
    LOG(WARNING) << "peer replica: refused a frame of " << bytes << " bytes for range ["
                 << meta.lo << ", " << meta.hi << ")";
    return nullptr;
  }
  absl::MutexLock lock(&mu_);
  incoming_.meta = ReplicaMeta{};
  incoming_.data.resize(floats);
  pending_meta_ = meta;
  return reinterpret_cast<char*>(incoming_.data.data());
}

void PeerReplica::Complete(bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) return;
  incoming_.meta = pending_meta_;
  std::swap(incoming_, held_);
}

}  // namespace worker
}  // namespace tandem
