// The hybrid strategy's landing: after FinishStep each group's pulled chunk
// reaches every rank of the node (the node allgather) on the communication
// thread, group by group as the pulls come in, and the model's parameter
// hook waits only for the groups under the layer it is about to run.
#include "common/sync/remote/hybrid_sync_internal.h"

namespace tandem {
namespace sync {
namespace hybrid_internal {

absl::Status HybridSyncImpl::Run(const CommOp& op) {
  if (op.kind == CommOp::kReduce) return RunGroup(op.group);
  if (op.kind == CommOp::kRing) return RunRing();
  const auto t = std::chrono::steady_clock::now();
  trace::Span span("land", "comm", groups_[op.group].block * int64_t{sizeof(float)}, op.group);
  absl::Status s = GatherGroup(op.group, op.step, /*delta=*/codec_ != nullptr);
  absl::MutexLock lock(&mu_);
  comm_seconds_ += SecondsSince(t);
  return s;
}

void HybridSyncImpl::QueueLandings(int64_t step) {
  const int n = static_cast<int>(groups_.size());
  for (int g = 0; g < n; ++g) land_ticket_[g] = executor_->Enqueue({CommOp::kLand, g, step});
  landing_ = n > 0;
}

absl::Status HybridSyncImpl::WaitLanded() {
  if (!landing_) return absl::OkStatus();
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = executor_->Drain();
  // A failed landing skips the later ones: their pulls may still be out.
  const absl::Status pulled = remote_->WaitAllPulls();
  if (s.ok()) s = pulled;
  landing_ = false;
  {
    absl::MutexLock lock(&mu_);
    wait_seconds_ += SecondsSince(start);
  }
  return s.ok() ? s : Fail(s);
}

absl::Status HybridSyncImpl::Gather(int64_t lo, int64_t hi, tensor::ParamPass) {
  // The model's offsets -> the servers' part (the ring part is stepped by
  // FinishStep itself).
  lo = std::max<int64_t>(0, lo - ring_offset_);
  hi -= ring_offset_;
  if (!landing_ || lo >= hi) return absl::OkStatus();
  int first = 0, end = 0;
  remote_->layout().ChunksMeeting(lo, hi, &first, &end);
  if (first >= end) return absl::OkStatus();
  int64_t last = -1;
  for (int g = first / local_size_; g <= (end - 1) / local_size_; ++g) {
    last = std::max(last, land_ticket_[g]);
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = executor_->Wait(last);
  {
    absl::MutexLock lock(&mu_);
    wait_seconds_ += SecondsSince(start);
  }
  if (!s.ok()) {
    (void)WaitLanded();
    return Fail(s);
  }
  return absl::OkStatus();
}

}  // namespace hybrid_internal
}  // namespace sync
}  // namespace tandem
