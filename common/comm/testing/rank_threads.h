// Test-only: runs a collective test body on one thread per rank, each rank
// with its own Communicator built over one shared in-memory rendezvous store
// (gloo::rendezvous::HashStore), the way Gloo's own tests sweep world sizes.
//
//   auto results = comm_testing::RunRanks(
//       3, [](int rank, gloo::rendezvous::Store& store) { return MakeMine(rank, store); },
//       [](int rank, Communicator& c) { return c.Barrier(); });
//
// Returns each rank's status (the factory's error if it could not build one).
#ifndef TANDEM_COMMON_COMM_TESTING_RANK_THREADS_H_
#define TANDEM_COMMON_COMM_TESTING_RANK_THREADS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/communicator.h"
#include "gloo/rendezvous/store.h"

namespace tandem {
namespace comm_testing {

using MakeCommunicator = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
    int rank, gloo::rendezvous::Store& store)>;
using RankBody = std::function<absl::Status(int rank, Communicator& comm)>;

std::vector<absl::Status> RunRanks(int world, const MakeCommunicator& make, const RankBody& body);

// Small integers: sums over ranks are exact in fp32, so tests compare with ==.
inline float ExactValue(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * ((i % 7) + 1));
}

}  // namespace comm_testing
}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_TESTING_RANK_THREADS_H_
