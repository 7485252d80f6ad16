// ShardLayout: how the flat parameter vector of n floats is spread over S
// shard servers and cut into the chunks that travel between workers and
// servers. Shared by the worker strategies (ps, hybrid) and the server, so
// both sides agree on every chunk's range without talking about it.
//
//   server s owns   ZeroShardMap(n, S).owned(s)   (balanced by bytes: S
//                   contiguous ranges of ceil(n / S) floats, the last ones
//                   shorter; the same map ZeRO uses for its shards)
//   its range is cut into ceil(len / chunk_elements) chunks of near-equal
//   length (they differ by at most one float), numbered globally in vector
//   order: chunk c covers [chunks()[c].lo, chunks()[c].hi).
//
//   ASSIGN_OR_RETURN(ShardLayout l, ShardLayout::Create(n, servers, 1 << 20));
//   for (int c = l.first_chunk(s); c < l.end_chunk(s); ++c) ... l.chunk(c) ...
//
// A server that owns nothing (S > n) has no chunks. Thread-safe (immutable
// value). Create fails with INVALID_ARGUMENT for n < 0, S < 1 or
// chunk_elements < 1.
#ifndef TANDEM_COMMON_SHARD_SHARD_LAYOUT_H_
#define TANDEM_COMMON_SHARD_SHARD_LAYOUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace shard {

struct Chunk {
  int64_t lo = 0;
  int64_t hi = 0;
  int server = 0;
  int64_t size() const { return hi - lo; }
};

class ShardLayout {
 public:
  static absl::StatusOr<ShardLayout> Create(int64_t size, int servers, int64_t chunk_elements);
  // Chunks of one server's range [lo, hi) (what the server builds from the
  // InitShard fields): same cut as Create's.
  static std::vector<Chunk> CutRange(int64_t lo, int64_t hi, int64_t chunk_elements, int server);
  // MiB of fp32 -> elements, at least 1.
  static int64_t ChunkElementsForMb(double mb);

  int64_t size() const { return size_; }
  int servers() const { return static_cast<int>(ranges_.size()); }
  int64_t chunk_elements() const { return chunk_elements_; }
  optim::ParamRange server_range(int s) const { return ranges_[s]; }
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const Chunk& chunk(int c) const { return chunks_[c]; }
  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  // The chunks that meet [lo, hi): [*first, *end) (empty when lo >= hi).
  // Chunks tile [0, size) in vector order, so this is a binary search.
  void ChunksMeeting(int64_t lo, int64_t hi, int* first, int* end) const;
  int first_chunk(int s) const { return first_[s]; }
  int end_chunk(int s) const { return first_[s + 1]; }

 private:
  ShardLayout() = default;
  int64_t size_ = 0;
  int64_t chunk_elements_ = 1;
  std::vector<optim::ParamRange> ranges_;
  std::vector<Chunk> chunks_;
  std::vector<int> first_;  // servers + 1 entries
};

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_SHARD_LAYOUT_H_
