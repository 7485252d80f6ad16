#include "common/shard/lane_queue.h"

#include <algorithm>
#include <utility>

namespace tandem {
namespace shard {

LaneQueue::LaneQueue(const LaneQueueOptions& o)
    : lowest_first_(o.lowest_chunk_first),
      push_order_(o.push_order),
      ring_(std::max<size_t>(1, o.capacity)) {}

void LaneQueue::Enqueue(const LaneJob& j) {
  absl::MutexLock lock(&mu_);
  ring_[(head_ + count_) % ring_.size()] = j;
  ++count_;
  cv_.Signal();
}

size_t LaneQueue::PickPush() const {
  // Among the pushes queued before the first close (if any): the due one,
  // the lowest, and the lowest not in push_order_.
  size_t due = count_, best = count_, unlisted = count_;
  bool closing = false;
  const int want = next_ < push_order_.size() ? push_order_[next_] : -1;
  auto lower = [&](size_t i, size_t than) {
    return than == count_ || ring_[(head_ + i) % ring_.size()].chunk <
                                 ring_[(head_ + than) % ring_.size()].chunk;
  };
  for (size_t i = 0; i < count_; ++i) {
    const LaneJob& j = ring_[(head_ + i) % ring_.size()];
    if (j.kind != LaneJob::kPush) {
      closing = true;
      break;
    }
    if (j.chunk == want) due = i;
    if (lower(i, best)) best = i;
    if (lower(i, unlisted) &&
        !std::binary_search(push_order_.begin(), push_order_.end(), j.chunk)) {
      unlisted = i;
    }
  }
  if (due != count_) return due;
  return closing || push_order_.empty() ? best : unlisted;
}

bool LaneQueue::Next(LaneJob* j) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    while (count_ == 0 && !stop_) cv_.Wait(&mu_);
    if (stop_) return false;
    if (!lowest_first_ || ring_[head_].kind != LaneJob::kPush) break;
    const size_t pick = PickPush();
    if (pick != count_) {
      std::swap(ring_[head_], ring_[(head_ + pick) % ring_.size()]);
      break;
    }
    cv_.Wait(&mu_);  // the due chunk is not queued yet
  }
  *j = ring_[head_];
  head_ = (head_ + 1) % ring_.size();
  --count_;
  if (j->kind == LaneJob::kClose) {
    next_ = 0;  // the step's stream ends: the next step starts the order again
  } else if (j->kind == LaneJob::kPush && next_ < push_order_.size() &&
             push_order_[next_] == j->chunk) {
    ++next_;
  }
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
