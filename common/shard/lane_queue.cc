#include "common/shard/lane_queue.h"

#include <algorithm>
#include <utility>

namespace tandem {
namespace shard {

LaneQueue::LaneQueue(const LaneQueueOptions& o)
    : lowest_first_(o.lowest_chunk_first), ring_(std::max<size_t>(1, o.capacity)) {}

void LaneQueue::Enqueue(const LaneJob& j) {
  absl::MutexLock lock(&mu_);
  ring_[(head_ + count_) % ring_.size()] = j;
  ++count_;
  cv_.Signal();
}

bool LaneQueue::Next(LaneJob* j) {
  absl::MutexLock lock(&mu_);
  while (count_ == 0 && !stop_) cv_.Wait(&mu_);
  if (stop_) return false;
  if (lowest_first_ && ring_[head_].kind == LaneJob::kPush) {
    // The pushes queued before the first close: the lowest chunk goes first.
    size_t best = head_;
    for (size_t i = 1; i < count_; ++i) {
      const size_t at = (head_ + i) % ring_.size();
      if (ring_[at].kind != LaneJob::kPush) break;
      if (ring_[at].chunk < ring_[best].chunk) best = at;
    }
    std::swap(ring_[head_], ring_[best]);
  }
  *j = ring_[head_];
  head_ = (head_ + 1) % ring_.size();
  --count_;
  return true;
}

void LaneQueue::Stop() {
  absl::MutexLock lock(&mu_);
  stop_ = true;
  cv_.SignalAll();
}

void PullGate::Reset() { std::fill(state_.begin(), state_.end(), kIdle); }

bool PullGate::Admit(const LaneJob& pull) {
  if (state_[pull.chunk] != kQueued) return true;
  state_[pull.chunk] = kHeld;
  held_[pull.chunk] = pull;
  return false;
}

bool PullGate::PushWritten(int c, LaneJob* pull) {
  const bool held = state_[c] == kHeld;
  state_[c] = kWritten;
  if (held) *pull = held_[c];
  return held;
}

}  // namespace shard
}  // namespace tandem
