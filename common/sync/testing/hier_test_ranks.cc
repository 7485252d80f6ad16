#include "common/sync/testing/hier_test_ranks.h"

#include <thread>
#include <utility>

#include "gloo/rendezvous/hash_store.h"

namespace tandem {
namespace sync {
namespace hier_testing {

std::vector<absl::Status> RunGroupRanks(const std::vector<std::string>& nodes, bool node_groups,
                                        const std::string& prefix, const GroupBody& body,
                                        absl::Duration timeout) {
  gloo::rendezvous::HashStore store;
  const int world = static_cast<int>(nodes.size());
  std::vector<absl::Status> results(world);
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      GroupOptions o;
      o.base.rank = r;
      o.base.world_size = world;
      o.base.store = &store;
      o.base.prefix = prefix;
      o.base.timeout = timeout;
      o.base.shm_chunk_bytes = 64 << 10;
      o.node = nodes[r];
      o.transport = "auto";
      o.node_groups = node_groups;
      absl::StatusOr<CommGroups> groups = CreateCommGroups(o);
      results[r] = groups.ok() ? body(r, *groups) : groups.status();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace hier_testing
}  // namespace sync
}  // namespace tandem
