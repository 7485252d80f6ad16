#include "services/shardserver/apply_queue.h"

#include <utility>

namespace tandem {
namespace shardserver {

ApplyQueue::ApplyQueue(int threads, std::function<void(const ApplyJob&)> run)
    : run_(std::move(run)) {
  {
    absl::MutexLock lock(&mu_);
    ring_.resize(64);
  }
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

ApplyQueue::~ApplyQueue() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

void ApplyQueue::Enqueue(ApplyJob job) {
  if (threads_.empty()) {
    run_(job);
    return;
  }
  absl::MutexLock lock(&mu_);
  if (count_ == ring_.size()) {
    // Unwrap into a ring twice the size (rare: only past the deepest queue yet).
    std::vector<ApplyJob> bigger(ring_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = std::move(ring_[(head_ + i) % ring_.size()]);
    ring_ = std::move(bigger);
    head_ = 0;
  }
  ring_[(head_ + count_) % ring_.size()] = std::move(job);
  ++count_;
  cv_.Signal();
}

void ApplyQueue::Loop() {
  for (;;) {
    ApplyJob job;
    {
      absl::MutexLock lock(&mu_);
      while (count_ == 0 && !stop_) cv_.Wait(&mu_);
      // Stopping: what is queued still runs (a waiting pull would
      // otherwise miss its step); then the thread ends.
      if (count_ == 0) return;
      job = std::move(ring_[head_]);
      head_ = (head_ + 1) % ring_.size();
      --count_;
    }
    run_(job);
  }
}

}  // namespace shardserver
}  // namespace tandem
