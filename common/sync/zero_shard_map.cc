#include "common/sync/zero_shard_map.h"

#include <cassert>

namespace tandem {
namespace sync {

ZeroShardMap::ZeroShardMap(int64_t size, int world)
    : size_(size), world_(world), shard_size_(world > 0 ? (size + world - 1) / world : 0) {
  assert(world >= 1 && size >= 0);
}

}  // namespace sync
}  // namespace tandem
