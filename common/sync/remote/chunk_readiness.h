// ChunkReadiness: which units of the flat gradient vector (the chunks a
// shard server takes, or hybrid's groups of chunks) are final this step,
// from the ranges backward reports. Units tile [0, n) in ascending order.
//
//   ChunkReadiness ready(units);
//   ready.Reset();                                    // per step
//   ready.Add(lo, hi, [&](int u) { Push(u); });       // per reported range
//
// Not thread-safe: one thread (backward's) calls Add between Resets.
// Nothing is allocated after construction. A range reported twice makes a
// unit's count wrong; complete() then says false and the strategy reports it.
#ifndef TANDEM_COMMON_SYNC_REMOTE_CHUNK_READINESS_H_
#define TANDEM_COMMON_SYNC_REMOTE_CHUNK_READINESS_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace tandem {
namespace sync {

class ChunkReadiness {
 public:
  explicit ChunkReadiness(std::vector<std::pair<int64_t, int64_t>> units)
      : units_(std::move(units)), remaining_(units_.size(), 0) {
    for (const auto& u : units_) lo_.push_back(u.first);
    Reset();
  }

  void Reset() {
    for (size_t u = 0; u < units_.size(); ++u) remaining_[u] = units_[u].second - units_[u].first;
    ready_ = 0;
    extra_ = 0;
  }

  template <typename OnReady>
  void Add(int64_t lo, int64_t hi, OnReady&& on_ready) {
    if (hi <= lo) return;
    auto it = std::upper_bound(lo_.begin(), lo_.end(), lo);
    int u = it == lo_.begin() ? 0 : static_cast<int>(it - lo_.begin()) - 1;
    for (; u < static_cast<int>(units_.size()) && units_[u].first < hi; ++u) {
      const int64_t a = std::max(lo, units_[u].first), b = std::min(hi, units_[u].second);
      if (b <= a) continue;
      remaining_[u] -= b - a;
      if (remaining_[u] == 0) {
        ++ready_;
        on_ready(u);
      } else if (remaining_[u] < 0) {
        ++extra_;
      }
    }
  }

  int size() const { return static_cast<int>(units_.size()); }
  int ready() const { return ready_; }
  bool complete() const { return ready_ == size() && extra_ == 0; }

 private:
  std::vector<std::pair<int64_t, int64_t>> units_;
  std::vector<int64_t> lo_;
  std::vector<int64_t> remaining_;
  int ready_ = 0;
  int extra_ = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_CHUNK_READINESS_H_
