#include "common/shard/shard_layout.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/shard/zero_shard_map.h"

namespace tandem {
namespace shard {

std::vector<Chunk> ShardLayout::CutRange(int64_t lo, int64_t hi, int64_t chunk_elements,
                                         int server) {
  std::vector<Chunk> out;
  const int64_t len = hi - lo;
  if (len <= 0 || chunk_elements < 1) return out;
  const int64_t count = (len + chunk_elements - 1) / chunk_elements;
  const int64_t base = len / count, extra = len % count;  // the first `extra` get one more
  int64_t at = lo;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t n = base + (i < extra ? 1 : 0);
    out.push_back({at, at + n, server});
    at += n;
  }
  return out;
}

void ShardLayout::ChunksMeeting(int64_t lo, int64_t hi, int* first, int* end) const {
  *first = *end = 0;
  if (lo >= hi || chunks_.empty()) return;
  // The first chunk whose end lies past lo, then the first that starts at or after hi.
  const auto a = std::partition_point(chunks_.begin(), chunks_.end(),
                                      [lo](const Chunk& c) { return c.hi <= lo; });
  const auto b = std::partition_point(a, chunks_.end(), [hi](const Chunk& c) { return c.lo < hi; });
  *first = static_cast<int>(a - chunks_.begin());
  *end = static_cast<int>(b - chunks_.begin());
}

int64_t ShardLayout::ChunkElementsForMb(double mb) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(mb * 1024 * 1024 / 4, 1e15)));
}

absl::StatusOr<ShardLayout> ShardLayout::Create(int64_t size, int servers,
                                                int64_t chunk_elements) {
  if (size < 0) return absl::InvalidArgumentError(absl::StrCat("shard layout: negative size ", size));
  if (servers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard layout: need at least one shard server, got ", servers));
  }
  if (chunk_elements < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard layout: chunk_elements must be >= 1, got ", chunk_elements));
  }
  ShardLayout l;
  l.size_ = size;
  l.chunk_elements_ = chunk_elements;
  const shard::ZeroShardMap map(size, servers);
  l.first_.push_back(0);
  for (int s = 0; s < servers; ++s) {
    const optim::ParamRange r = map.owned(s);
    l.ranges_.push_back(r);
    for (const Chunk& c : CutRange(r.lo, r.hi, chunk_elements, s)) l.chunks_.push_back(c);
    l.first_.push_back(static_cast<int>(l.chunks_.size()));
  }
  return l;
}

}  // namespace shard
}  // namespace tandem
