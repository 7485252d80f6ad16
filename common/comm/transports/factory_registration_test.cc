// A transport registered at run time (RegisterTransport) is listed, sorted,
// and reaches its creator with the caller's options. Its own binary: the
// registration is process-global, and factory_test checks the exact list of
// transports a plain binary has.
#include <memory>
#include <string>
#include <vector>

#include "common/comm/factory.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(Factory, RegisteredTransportIsUsedAndListed) {
  // A transport registered by a test reaches its creator with the options.
  static int seen_rank = -1;
  RegisterTransport("zz_test",
                    [](const CommOptions& o) -> absl::StatusOr<std::unique_ptr<Communicator>> {
                      seen_rank = o.rank;
                      return absl::ResourceExhaustedError("zz_test creator ran");
                    });
  EXPECT_TRUE(TransportAvailable("zz_test"));
  EXPECT_EQ(AvailableTransports(), (std::vector<std::string>{"gloo", "shm", "zz_test"}));
  gloo::rendezvous::HashStore store;
  CommOptions o;
  o.transport = "zz_test";
  o.store = &store;
  o.world_size = 4;
  o.rank = 3;
  EXPECT_EQ(CreateCommunicator(o).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(seen_rank, 3);
}

}  // namespace
}  // namespace tandem
