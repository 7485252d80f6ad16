#include "common/shard/zero_shard_map.h"

#include <cassert>

namespace tandem {
namespace shard {

ZeroShardMap::ZeroShardMap(int64_t size, int world)
    : size_(size), world_(world), shard_size_(world > 0 ? (size + world - 1) / world : 0) {
  assert(world >= 1 && size >= 0);
}

}  // namespace shard
}  // namespace tandem
