// The hybrid strategy's communication work: per group, the reduce-scatter
// inside the node and the push of this rank's chunk (int8-encoded with
// compress=int8); after the pulls, the gather of the node's chunks.
#include "common/sync/remote/hybrid_sync_internal.h"

namespace tandem {
namespace sync {
namespace hybrid_internal {

void HybridSyncImpl::PushMine(int g, int64_t step) {
  const int mine = groups_[g].first + local_rank_;
  if (mine >= groups_[g].end) return;
  // One rank per node: its own gradients are the node sum (no copy).
  const float* values = local_size_ == 1 ? grads_ + remote_->layout().chunk(mine).lo
                                         : slice_.data() + slice_offset_[g];
  if (feedback_ == nullptr) {
    remote_->Push(mine, values);
  } else {
    const shard::Chunk& c = remote_->layout().chunk(mine);
    uint8_t* block = encoded_.data() + encoded_offset_[g];
    const int64_t bytes = feedback_->Encode(values, c.lo, c.size(), EncodeParams{}, block);
    remote_->Push(mine, block);
    absl::MutexLock lock(&mu_);
    compress_before_ += c.size() * int64_t{sizeof(float)};
    compress_after_ += bytes;
  }
  if (pipeline_) PullMine(g, step);
}

void HybridSyncImpl::PullMine(int g, int64_t step) {
  const int mine = groups_[g].first + local_rank_;
  if (mine >= groups_[g].end) return;
  if (codec_ != nullptr) {
    remote_->PullDelta(mine, step, pulled_.data() + encoded_offset_[g]);
  } else {
    remote_->Pull(mine, step, params_);
  }
}

absl::Status HybridSyncImpl::ReduceGroup(int g) {
  const Group& gr = groups_[g];
  const shard::ShardLayout& l = remote_->layout();
  const int mine = gr.first + local_rank_;
  if (local_size_ == 1) return absl::OkStatus();  // PushMine sends grads_ itself
  absl::Status s = shares_->ReducePieces(grads_, gr.pieces, gr.block);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("hybrid sync: intra-node reduce-scatter of chunk "
                                               "group ", g, " on rank ", world_->rank(), ": ",
                                               s.message()));
  }
  if (mine < gr.end) {
    std::memcpy(slice_.data() + slice_offset_[g], shares_->share(),
                l.chunk(mine).size() * sizeof(float));
  }
  absl::MutexLock lock(&mu_);
  intra_bytes_ += gr.block * local_size_ * int64_t{sizeof(float)};
  ++collectives_;
  return absl::OkStatus();
}

absl::Status HybridSyncImpl::GatherGroup(int g, int64_t step, bool delta) {
  const Group& gr = groups_[g];
  const shard::ShardLayout& l = remote_->layout();
  const int mine = gr.first + local_rank_;
  if (mine < gr.end) {
    RETURN_IF_ERROR(remote_->WaitPulled(mine));
    if (delta) {
      const shard::Chunk& c = l.chunk(mine);
      codec_->DecodeAdd(pulled_.data() + encoded_offset_[g], c.size(), params_ + c.lo);
      absl::MutexLock lock(&mu_);
      compress_before_ += c.size() * int64_t{sizeof(float)};
      compress_after_ += codec_->MaxEncodedBytes(c.size());
    }
  }
  if (local_size_ == 1) return absl::OkStatus();
  // This rank's chunk (pulled) is its share; the other ranks' come back.
  if (mine < gr.end) {
    const shard::Chunk& c = l.chunk(mine);
    std::memcpy(shares_->share(), params_ + c.lo, c.size() * sizeof(float));
  }
  absl::Status s = shares_->GatherPieces(params_, gr.pieces, gr.block);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("hybrid sync: intra-node allgather of chunk group ",
                                               g, " at step ", step, " on rank ", world_->rank(),
                                               ": ", s.message()));
  }
  absl::MutexLock lock(&mu_);
  intra_bytes_ += gr.block * int64_t{sizeof(float)};
  ++collectives_;
  return absl::OkStatus();
}

absl::Status HybridSyncImpl::RunGroup(int g) {
  bool push = false;
  int64_t step = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!step_open_ || !comm_error_.ok()) return absl::OkStatus();  // abandoned: skip
    push = push_now_;
    step = push_step_;
  }
  const auto t = std::chrono::steady_clock::now();
  trace::Span span("node reduce", "comm", groups_[g].block * local_size_ * int64_t{sizeof(float)},
                   g);
  absl::Status s = ReduceGroup(g);
  if (s.ok() && push) PushMine(g, step);
  absl::MutexLock lock(&mu_);
  comm_seconds_ += SecondsSince(t);
  if (!s.ok()) {
    comm_error_ = s;
    return s;
  }
  return absl::OkStatus();
}

absl::Status HybridSyncImpl::RunRing() {
  {
    absl::MutexLock lock(&mu_);
    if (!step_open_ || !comm_error_.ok()) return absl::OkStatus();  // abandoned: skip
  }
  const auto t = std::chrono::steady_clock::now();
  trace::Span span("ring part", "comm", ring_->size() * int64_t{sizeof(float)}, 0);
  absl::Status s = ring_->Reduce();
  absl::MutexLock lock(&mu_);
  comm_seconds_ += SecondsSince(t);
  ring_bytes_ = ring_->inter_node_bytes();
  ++collectives_;
  if (!s.ok()) {
    comm_error_ = s;
    return s;
  }
  return absl::OkStatus();
}

}  // namespace hybrid_internal

}  // namespace sync
}  // namespace tandem
