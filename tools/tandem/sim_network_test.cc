// The simulated links against the kernel: needs a private network namespace
// (root or CAP_SYS_ADMIN); every test skips, with the reason, where one
// cannot be made.
#include "tools/tandem/sim_network.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

std::string LogPath() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/sim_network.log";
}

// Skips the test (with the reason) when no namespace can be made.
#define CREATE_OR_SKIP(net, options)                                              \
  auto net##_or = SimulatedNetwork::Create(options);                              \
  if (!net##_or.ok() &&                                                           \
      absl::StartsWith(net##_or.status().message(), kNoNamespaceMessage)) {       \
    GTEST_SKIP() << net##_or.status().message();                                  \
  }                                                                               \
  ASSERT_TRUE(net##_or.ok()) << net##_or.status();                                \
  std::unique_ptr<SimulatedNetwork> net = *std::move(net##_or)

sockaddr_in Addr(const std::string& ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// Sends `bytes` over TCP from `from` (bound) to a listener on `to`; returns
// the seconds from connect to the receiver having read every byte.
double Transfer(const std::string& from, const std::string& to, int64_t bytes) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in la = Addr(to, 0);
  EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&la), sizeof(la)), 0);
  EXPECT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof(la);
  getsockname(listener, reinterpret_cast<sockaddr*>(&la), &len);
  absl::Time done;
  std::thread receiver([&] {
    const int fd = accept(listener, nullptr, nullptr);
    std::vector<char> buf(1 << 16);
    int64_t got = 0;
    while (got < bytes) {
      const ssize_t n = read(fd, buf.data(), buf.size());
      if (n <= 0) break;
      got += n;
    }
    done = absl::Now();
    EXPECT_EQ(got, bytes);
    close(fd);
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in src = Addr(from, 0);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)), 0);
  const absl::Time start = absl::Now();
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&la), sizeof(la)), 0);
  std::vector<char> chunk(1 << 16, 'x');
  int64_t sent = 0;
  while (sent < bytes) {
    const ssize_t n = write(fd, chunk.data(), std::min<int64_t>(chunk.size(), bytes - sent));
    if (n <= 0) break;
    sent += n;
  }
  shutdown(fd, SHUT_WR);
  receiver.join();
  close(fd);
  close(listener);
  return absl::ToDoubleSeconds(done - start);
}

// The check: a transfer between two nodes' addresses runs within
// ±15% of the configured rate, and the sender's class counted it.
TEST(SimulatedNetworkTest, TransferBetweenNodesRunsAtTheLinkRateAndIsCounted) {
  SimulatedNetworkOptions o;
  o.nodes = 2;
  o.link_bits_per_second = 100'000'000;
  o.log_path = LogPath();
  CREATE_OR_SKIP(net, o);
  EXPECT_TRUE(absl::StrContains(net->Describe(), "100mbit")) << net->Describe();
  constexpr int64_t kBytes = 12'500'000;  // 1 s at 100 Mbit/s
  const double seconds =
      Transfer(SimulatedNetwork::NodeAddress(1), SimulatedNetwork::NodeAddress(2), kBytes);
  const double bps = kBytes * 8 / seconds;
  ::testing::Test::RecordProperty("measured_mbit_per_s", std::to_string(bps / 1e6));
  EXPECT_GT(bps, 0.85 * o.link_bits_per_second) << bps / 1e6 << " Mbit/s";
  EXPECT_LT(bps, 1.15 * o.link_bits_per_second) << bps / 1e6 << " Mbit/s";
  auto sent = net->NodeLinkBytes();
  ASSERT_TRUE(sent.ok()) << sent.status();
  ASSERT_EQ(sent->size(), 2u);
  // Payload plus TCP/IP headers of ~64 KiB segments; node 2 sent only ACKs.
  EXPECT_GE((*sent)[0], kBytes);
  EXPECT_LT((*sent)[0], kBytes * 21 / 20);
  EXPECT_LT((*sent)[1], kBytes / 20);
}

// Not node links: a node talking to itself and a node talking to the
// services run unshaped and are not counted in the node's class.
TEST(SimulatedNetworkTest, ServiceAndSameNodeTrafficAreNotNodeLinks) {
  SimulatedNetworkOptions o;
  o.nodes = 2;
  o.link_bits_per_second = 10'000'000;  // 10 Mbit/s: 4 MB would take 3.2 s
  o.log_path = LogPath();
  CREATE_OR_SKIP(net, o);
  constexpr int64_t kBytes = 4'000'000;
  const double to_self =
      Transfer(SimulatedNetwork::NodeAddress(1), SimulatedNetwork::NodeAddress(1), kBytes);
  const double to_services =
      Transfer(SimulatedNetwork::NodeAddress(2), SimulatedNetwork::ServiceAddress(), kBytes);
  auto sent = net->NodeLinkBytes();
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_LT((*sent)[0], kBytes / 100) << "node 1 to itself was counted as a link";
  EXPECT_LT((*sent)[1], kBytes / 100) << "node 2 to the services was counted as a link";
  // Both far faster than the 3.2 s the 10 Mbit/s link would need.
  EXPECT_LT(to_self, 1.6);
  EXPECT_LT(to_services, 1.6);
}

TEST(SimulatedNetworkTest, TheCallerReturnsToItsNamespaceAfterwards) {
  char before[64] = {0};
  ASSERT_GT(readlink("/proc/thread-self/ns/net", before, sizeof(before) - 1), 0);
  {
    SimulatedNetworkOptions o;
    o.nodes = 1;
    o.log_path = LogPath();
    CREATE_OR_SKIP(net, o);
    char inside[64] = {0};
    ASSERT_GT(readlink("/proc/thread-self/ns/net", inside, sizeof(inside) - 1), 0);
    EXPECT_STRNE(before, inside);
  }
  char after[64] = {0};
  ASSERT_GT(readlink("/proc/thread-self/ns/net", after, sizeof(after) - 1), 0);
  EXPECT_STREQ(before, after);
}

TEST(SimulatedNetworkTest, BadOptionsAreInvalidArgumentBeforeAnyNamespace) {
  SimulatedNetworkOptions o;
  o.nodes = 0;
  EXPECT_EQ(SimulatedNetwork::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.nodes = kMaxSimulatedNodes + 1;
  EXPECT_EQ(SimulatedNetwork::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cli
}  // namespace tandem
