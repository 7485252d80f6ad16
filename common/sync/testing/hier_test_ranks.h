// Test-only: one thread per rank, each building this generation's
// CommGroups (CreateCommGroups, transport "auto": shm inside a node, Gloo
// across) over one shared in-memory store, with the node of every rank
// given by the test; then the test body runs on every rank.
//
//   auto results = hier_testing::RunGroupRanks(
//       {"a", "a", "b", "b"}, /*node_groups=*/true, prefix,
//       [](int rank, CommGroups& g) { return g.intra->Barrier(); });
//
// Returns each rank's status (CreateCommGroups' error when it failed).
// `prefix` must be unique per test and process: shm puts it in segment names.
#ifndef TANDEM_COMMON_SYNC_TESTING_HIER_TEST_RANKS_H_
#define TANDEM_COMMON_SYNC_TESTING_HIER_TEST_RANKS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/comm/groups.h"

namespace tandem {
namespace sync {
namespace hier_testing {

using GroupBody = std::function<absl::Status(int rank, CommGroups& groups)>;

std::vector<absl::Status> RunGroupRanks(const std::vector<std::string>& nodes, bool node_groups,
                                        const std::string& prefix, const GroupBody& body,
                                        absl::Duration timeout = absl::Seconds(60));

}  // namespace hier_testing
}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_TESTING_HIER_TEST_RANKS_H_
