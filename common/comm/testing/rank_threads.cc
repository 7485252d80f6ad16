#include "common/comm/testing/rank_threads.h"

#include <thread>

#include "gloo/rendezvous/hash_store.h"

namespace tandem {
namespace comm_testing {

std::vector<absl::Status> RunRanks(int world, const MakeCommunicator& make, const RankBody& body) {
  gloo::rendezvous::HashStore store;
  std::vector<absl::Status> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = make(r, store);
      results[r] = comm.ok() ? body(r, **comm) : comm.status();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace comm_testing
}  // namespace tandem
