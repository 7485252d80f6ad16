// SimulatedNetwork: several "hosts" with rate-limited links on one machine,
// for `tandem local --nodes N --link RATE`. Moves the calling thread into a
// private network namespace of its own (unshare(CLONE_NEWNET)); children it
// forks afterwards (ip, tc, the cluster's processes) are born inside it.
//
//   SimulatedNetworkOptions o;
//   o.nodes = 2;
//   o.link_bits_per_second = 100'000'000;        // 0 = unshaped (still counted)
//   ASSIGN_OR_RETURN(auto net, SimulatedNetwork::Create(o));
//   // start node n's processes bound to net->NodeAddress(n) (n = 1..nodes)
//   ASSIGN_OR_RETURN(std::vector<int64_t> sent, net->NodeLinkBytes());
//
// Inside the namespace: `lo` is up with 127.0.1.n/8 for node n and
// 127.0.1.100/8 for the services (coordinator, data server); every address
// is in 127.0.0.0/8. An htb root qdisc on `lo` has one class per node
// (1:n, rate = ceil = the link rate) chosen by a u32 filter on the source
// address, so everything node n sends to another node's address is shaped
// and counted there. Traffic to the service address and a node's traffic to
// itself go to the unshaped class 1:99 (not a node link). With
// link_delay_ms > 0 a netem qdisc adds that delay under each node class;
// kernels without netem get FAILED_PRECONDITION.
//
// Failure: no privilege for a namespace (not root, no CAP_SYS_ADMIN, or a
// sandbox that forbids it) is FAILED_PRECONDITION whose message starts with
// kNoNamespaceMessage and says what is needed; a missing ip/tc or a tc that
// refuses a command is FAILED_PRECONDITION naming the command and its
// output. Commands and their output go to options.log_path.
// Lifetime: the destructor returns the calling thread to the namespace it
// was in; the namespace itself goes away with the last process inside it.
// Not thread-safe: create, use and destroy on one thread.
#ifndef TANDEM_TOOLS_TANDEM_SIM_NETWORK_H_
#define TANDEM_TOOLS_TANDEM_SIM_NETWORK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
namespace cli {

inline constexpr char kNoNamespaceMessage[] = "cannot create a network namespace";
inline constexpr int kMaxSimulatedNodes = 99;

struct SimulatedNetworkOptions {
  int nodes = 1;                     // 1..kMaxSimulatedNodes
  int64_t link_bits_per_second = 0;  // each node's outgoing link; 0 = unshaped
  double link_delay_ms = 0;          // netem delay per node link; 0 = none
  std::string log_path = "/dev/null";  // ip/tc commands and their output (appended)
};

class SimulatedNetwork {
 public:
  static absl::StatusOr<std::unique_ptr<SimulatedNetwork>> Create(
      const SimulatedNetworkOptions& options);
  ~SimulatedNetwork();
  SimulatedNetwork(const SimulatedNetwork&) = delete;
  SimulatedNetwork& operator=(const SimulatedNetwork&) = delete;

  // "127.0.1.<node>" for node 1..nodes.
  static std::string NodeAddress(int node);
  // "127.0.1.100": where the coordinator and the data server listen.
  static std::string ServiceAddress();

  const SimulatedNetworkOptions& options() const { return options_; }
  // Whether this kernel has the netem qdisc (probed at Create).
  bool netem_available() const { return netem_available_; }
  // One line for a run's header: nodes, rate, shaping, latency and netem.
  std::string Describe() const;
  // Bytes each node's link class has sent so far (index 0 = node 1), read
  // from `tc -s class show dev lo`: IP packets as they left, headers included.
  absl::StatusOr<std::vector<int64_t>> NodeLinkBytes() const;

 private:
  explicit SimulatedNetwork(SimulatedNetworkOptions o) : options_(std::move(o)) {}
  absl::Status Setup();

  SimulatedNetworkOptions options_;
  int original_namespace_fd_ = -1;
  bool netem_available_ = false;
};

// Runs `command` through /bin/sh -c with stderr folded into stdout, appends
// both to `log_path`, and returns the output; FAILED_PRECONDITION with the
// output when it exits non-zero. For ip and tc.
absl::StatusOr<std::string> RunNetworkCommand(const std::string& command,
                                              const std::string& log_path);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_SIM_NETWORK_H_
