// A Gloo TCP peer whose sockets close (its process died) fails the
// survivor's collective at once with an error that names the peer's rank
// (PeerConnectionBrokeText), which the worker reports to the coordinator;
// and PeerNamedIn's whole-address matching.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/comm/gloo/peer_addresses.h"
#include "common/comm/peer_exited.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(GlooPeerLoss, AClosedPeerIsNamedByRank) {
  gloo::rendezvous::HashStore store;
  std::vector<std::unique_ptr<GlooCommunicator>> comms(2);
  std::vector<std::thread> connect;
  for (int rank = 0; rank < 2; ++rank) {
    connect.emplace_back([&, rank] {
      GlooOptions o;
      o.rank = rank;
      o.world_size = 2;
      o.store = &store;
      o.timeout = absl::Seconds(60);  // far longer than the test: not a timeout
      auto c = GlooCommunicator::Create(o);
      ASSERT_TRUE(c.ok()) << c.status();
      comms[rank] = std::move(*c);
    });
  }
  for (std::thread& t : connect) t.join();
  ASSERT_TRUE(comms[0] && comms[1]);
  comms[1].reset();  // its sockets close, as when its process dies
  std::vector<float> data(1000, 1.0f);
  const absl::Status s = comms[0]->AllReduce(data.data(), static_cast<int64_t>(data.size()), ReduceOp::kSum);
  ASSERT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(BrokenPeerRank(s.message()), 1) << s;
  EXPECT_EQ(ExitedPeerRank(s.message()), -1) << "no proof of an exit: " << s;
}

TEST(GlooPeerLoss, PeerNamedInMatchesWholeAddressesOnly) {
  const std::vector<std::string> peers = {"", "[127.0.0.1]:4123", "[127.0.0.1]:41234"};
  EXPECT_EQ(PeerNamedIn(peers, "Connection closed by peer [127.0.0.1]:41234"), 2);
  EXPECT_EQ(PeerNamedIn(peers, "Read error [127.0.0.1]:4123: Connection reset by peer"), 1);
  EXPECT_EQ(PeerNamedIn(peers, "Timed out waiting"), -1);
  EXPECT_EQ(PeerNamedIn(peers, "[127.0.0.1]:4123 and [127.0.0.1]:41234"), -1);  // ambiguous
  EXPECT_EQ(PeerNamedIn({}, "[127.0.0.1]:4123"), -1);
  // An ephemeral port (the accepting side): the host names the rank when
  // only one peer lives there.
  const std::vector<std::string> hosts = {"[10.0.0.1]:4000", "", "[10.0.0.2]:4000"};
  EXPECT_EQ(PeerNamedIn(hosts, "Connection closed by peer [10.0.0.2]:51234"), 2);
  EXPECT_EQ(PeerNamedIn(peers, "Connection closed by peer [127.0.0.1]:51234"), -1);
  EXPECT_EQ(PeerNamedIn(hosts, "Connection closed by peer [10.0.0.22]:4000"), -1);
}

TEST(PeerConnectionBroke, RoundTripsThroughWrappingText) {
  const std::string wrapped = "training step: gloo allreduce on rank 0 failed: Read error: (" +
                              PeerConnectionBrokeText(12) + ")";
  EXPECT_EQ(BrokenPeerRank(wrapped), 12);
  EXPECT_EQ(BrokenPeerRank("the connection to rank x broke"), -1);
  EXPECT_EQ(BrokenPeerRank(PeerExitedText(3, 99)), -1);
}

}  // namespace
}  // namespace tandem
