#include "common/comm/testing/gloo_ranks.h"

#include <memory>

#include "common/comm/gloo/gloo_communicator.h"

namespace tandem {
namespace comm_testing {

std::vector<absl::Status> RunGlooRanks(int world, absl::Duration timeout, const RankBody& body) {
  return RunRanks(
      world,
      [world, timeout](int rank,
                       gloo::rendezvous::Store& store) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        GlooOptions o;
        o.rank = rank;
        o.world_size = world;
        o.store = &store;
        o.timeout = timeout;
        return GlooCommunicator::Create(o);
      },
      body);
}

}  // namespace comm_testing
}  // namespace tandem
