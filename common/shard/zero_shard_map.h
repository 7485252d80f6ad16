// ZeroShardMap: how ZeRO cuts the flat parameter vector into one contiguous
// shard per rank. The vector of n floats is padded to a multiple of the
// world size N; every shard has the same padded length S = ceil(n / N), and
// rank r owns
//
//   padded [r*S, (r+1)*S)      real   [min(r*S, n), min((r+1)*S, n))
//
// so the padding (padded_size() - n < N floats) sits at the end of the last
// shards, and when N > n the last ranks own nothing real. The map is a pure
// function of (n, N), hence the same on every rank; checkpoints record the
// real ranges, so a load at another N re-slices through a new map.
//
//   ZeroShardMap map(n, world);
//   optim::ParamRange mine = map.owned(rank);   // what this rank's optimizer steps
//
// Thread-safe (immutable value). N < 1 or n < 0 is the caller's bug (DCHECK).
#ifndef TANDEM_COMMON_SHARD_ZERO_SHARD_MAP_H_
#define TANDEM_COMMON_SHARD_ZERO_SHARD_MAP_H_

#include <algorithm>
#include <cstdint>

#include "common/optim/optimizer.h"

namespace tandem {
namespace shard {

class ZeroShardMap {
 public:
  ZeroShardMap(int64_t size, int world);

  int64_t size() const { return size_; }             // n, unpadded
  int world() const { return world_; }               // N
  int64_t shard_size() const { return shard_size_; } // S, padded shard length
  int64_t padded_size() const { return shard_size_ * world_; }

  // The real (unpadded) elements rank r owns; empty when r*S >= n.
  optim::ParamRange owned(int rank) const {
    const int64_t lo = std::min<int64_t>(int64_t{rank} * shard_size_, size_);
    const int64_t hi = std::min<int64_t>(lo + shard_size_, size_);
    return {lo, std::max(lo, hi)};
  }
  // The rank whose shard holds element i (0 <= i < n).
  int owner(int64_t i) const { return static_cast<int>(i / shard_size_); }
  // The part of [lo, hi) in rank r's shard (empty, at its clamped start,
  // when they do not meet).
  optim::ParamRange piece(int rank, int64_t lo, int64_t hi) const {
    const optim::ParamRange o = owned(rank);
    const int64_t a = std::max(lo, o.lo), b = std::min(hi, o.hi);
    return {a, std::max(a, b)};
  }

 private:
  int64_t size_;
  int world_;
  int64_t shard_size_;
};

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_ZERO_SHARD_MAP_H_
