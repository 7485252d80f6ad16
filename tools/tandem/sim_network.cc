#include "tools/tandem/sim_network.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/plan/simulated_burst.h"
#include "common/status/status_macros.h"
#include "tools/tandem/link_rate.h"

namespace tandem {
namespace cli {
namespace {

constexpr int kServiceHost = 100;
constexpr int kUnshapedClass = 0x99;
// "Unshaped" classes still need a rate; far above what lo moves here (~20 Gbit/s).
constexpr char kUnshapedRate[] = "400gbit";

std::string ClassId(int minor) { return absl::StrFormat("1:%x", minor); }

}  // namespace

absl::StatusOr<std::string> RunNetworkCommand(const std::string& command,
                                              const std::string& log_path) {
  std::string out;
  // ip and tc live in /usr/sbin, which a test's or a user's PATH may lack.
  const std::string shell =
      absl::StrCat("export PATH=\"$PATH:/usr/sbin:/sbin\"; ", command, " 2>&1");
  FILE* p = popen(shell.c_str(), "r");
  if (p == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run `", command, "`: ", std::strerror(errno)));
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  {
    std::ofstream log(log_path, std::ios::app);
    log << "$ " << command << "\n" << out;
  }
  if (status != 0) {
    const bool missing = WIFEXITED(status) && WEXITSTATUS(status) == 127;
    return absl::FailedPreconditionError(absl::StrCat(
        "`", command, "` failed", missing ? " (not found: install iproute2, tools/setup.sh)" : "",
        ": ", absl::StripTrailingAsciiWhitespace(out)));
  }
  return out;
}

std::string SimulatedNetwork::NodeAddress(int node) { return absl::StrCat("127.0.1.", node); }
std::string SimulatedNetwork::ServiceAddress() { return absl::StrCat("127.0.1.", kServiceHost); }

absl::StatusOr<std::unique_ptr<SimulatedNetwork>> SimulatedNetwork::Create(
    const SimulatedNetworkOptions& options) {
  if (options.nodes < 1 || options.nodes > kMaxSimulatedNodes) {
    return absl::InvalidArgumentError(absl::StrCat("simulated nodes must be 1..",
                                                   kMaxSimulatedNodes, " (got ", options.nodes,
                                                   ")"));
  }
  if (options.link_bits_per_second < 0 || options.link_delay_ms < 0) {
    return absl::InvalidArgumentError("link rate and delay must not be negative");
  }
  std::unique_ptr<SimulatedNetwork> net(new SimulatedNetwork(options));
  // Only this thread moves: network namespaces are per task, and the
  // children forked from it inherit it. The old one is kept to go back to.
  net->original_namespace_fd_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (net->original_namespace_fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kNoNamespaceMessage, ": cannot open /proc/thread-self/ns/net: ", std::strerror(errno)));
  }
  if (unshare(CLONE_NEWNET) != 0) {
    const int err = errno;
    return absl::FailedPreconditionError(absl::StrCat(
        kNoNamespaceMessage, " (unshare(CLONE_NEWNET): ", std::strerror(err),
        "); simulated nodes need root or CAP_SYS_ADMIN (run as root, or without --nodes "
        "for one unshaped host)"));
  }
  RETURN_IF_ERROR(net->Setup());
  return net;
}

SimulatedNetwork::~SimulatedNetwork() {
  if (original_namespace_fd_ >= 0) {
    setns(original_namespace_fd_, CLONE_NEWNET);  // back to where the caller was
    close(original_namespace_fd_);
  }
}

absl::Status SimulatedNetwork::Setup() {
  const std::string& log = options_.log_path;
  auto run = [&](const std::string& c) { return RunNetworkCommand(c, log).status(); };
  RETURN_IF_ERROR(run("ip link set lo up"));
  for (int n = 1; n <= options_.nodes; ++n) {
    RETURN_IF_ERROR(run(absl::StrCat("ip addr add ", NodeAddress(n), "/8 dev lo")));
  }
  RETURN_IF_ERROR(run(absl::StrCat("ip addr add ", ServiceAddress(), "/8 dev lo")));
  RETURN_IF_ERROR(run(absl::StrFormat("tc qdisc add dev lo root handle 1: htb default %x r2q 1000",
                                      kUnshapedClass)));
  RETURN_IF_ERROR(run(absl::StrCat("tc class add dev lo parent 1: classid ",
                                   ClassId(kUnshapedClass), " htb rate ", kUnshapedRate,
                                   " quantum 200000")));
  // The burst rule is shared with tandem plan (common/plan/simulated_burst.h).
  const std::string rate = options_.link_bits_per_second > 0
                               ? FormatLinkRate(options_.link_bits_per_second)
                               : std::string(kUnshapedRate);
  const int64_t burst = plan::SimulatedBurstBytes(options_.link_bits_per_second);
  for (int n = 1; n <= options_.nodes; ++n) {
    RETURN_IF_ERROR(run(absl::StrCat("tc class add dev lo parent 1: classid ", ClassId(n),
                                     " htb rate ", rate, " ceil ", rate, " burst ", burst,
                                     "b cburst ", burst, "b quantum 200000")));
  }
  // Filters, first match wins by priority: the services and a node's
  // traffic to itself are not node links; the rest of node n is node n's link.
  RETURN_IF_ERROR(run(absl::StrCat("tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip dst ",
                                   ServiceAddress(), "/32 flowid ", ClassId(kUnshapedClass))));
  for (int n = 1; n <= options_.nodes; ++n) {
    const std::string a = NodeAddress(n);
    RETURN_IF_ERROR(run(absl::StrCat("tc filter add dev lo parent 1: protocol ip prio 2 u32 match ip src ",
                                     a, "/32 match ip dst ", a, "/32 flowid ",
                                     ClassId(kUnshapedClass))));
    RETURN_IF_ERROR(run(absl::StrCat("tc filter add dev lo parent 1: protocol ip prio 3 u32 match ip src ",
                                     a, "/32 flowid ", ClassId(n))));
  }
  // netem: probed on the unshaped class (and removed) so the header can say.
  netem_available_ =
      RunNetworkCommand(absl::StrFormat("tc qdisc add dev lo parent %s handle 999: netem delay 0ms",
                                        ClassId(kUnshapedClass)),
                        log)
          .ok();
  if (netem_available_) {
    RETURN_IF_ERROR(run(absl::StrFormat("tc qdisc del dev lo parent %s handle 999:",
                                        ClassId(kUnshapedClass))));
  }
  if (options_.link_delay_ms > 0) {
    if (!netem_available_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--link_delay_ms=", options_.link_delay_ms,
          " needs the netem qdisc, which this kernel does not have (\"Specified qdisc kind is "
          "unknown\"); drop --link_delay_ms (links are then shaped by rate only)"));
    }
    for (int n = 1; n <= options_.nodes; ++n) {
      RETURN_IF_ERROR(run(absl::StrFormat("tc qdisc add dev lo parent %s handle %x: netem delay %.3fms",
                                          ClassId(n), 0x100 + n, options_.link_delay_ms)));
    }
  }
  return absl::OkStatus();
}

std::string SimulatedNetwork::Describe() const {
  std::string latency;
  if (options_.link_delay_ms > 0) {
    latency = absl::StrCat(options_.link_delay_ms, " ms netem delay");
  } else {
    latency = netem_available_ ? "no added latency (netem available, --link_delay_ms unset)"
                               : "no added latency (this kernel has no netem)";
  }
  return absl::StrCat(
      options_.nodes, " node(s) in a private network namespace, node n at 127.0.1.n, services at ",
      ServiceAddress(), " (unshaped); each node's link ",
      options_.link_bits_per_second > 0
          ? absl::StrCat(FormatLinkRate(options_.link_bits_per_second), " (htb on lo)")
          : std::string("unshaped (counted by htb on lo)"),
      ", ", latency);
}

absl::StatusOr<std::vector<int64_t>> SimulatedNetwork::NodeLinkBytes() const {
  ASSIGN_OR_RETURN(std::string text,
                   RunNetworkCommand("tc -s class show dev lo", "/dev/null"));
  std::vector<int64_t> bytes(options_.nodes, -1);
  // "class htb 1:a root prio 0 rate ..." then " Sent 123 bytes 4 pkt ...".
  int current = -1;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (w.size() >= 3 && w[0] == "class" && absl::ConsumePrefix(&w[2], "1:")) {
      unsigned int minor = 0;
      current = absl::SimpleHexAtoi(w[2], &minor) ? static_cast<int>(minor) : -1;
    } else if (w.size() >= 3 && w[0] == "Sent" && w[2] == "bytes" && current >= 1 &&
               current <= options_.nodes) {
      int64_t sent = 0;
      if (absl::SimpleAtoi(w[1], &sent)) bytes[current - 1] = sent;
      current = -1;
    }
  }
  for (int n = 1; n <= options_.nodes; ++n) {
    if (bytes[n - 1] < 0) {
      return absl::InternalError(absl::StrCat("no byte counter for class ", ClassId(n),
                                              " in `tc -s class show dev lo`:\n", text));
    }
  }
  return bytes;
}

}  // namespace cli
}  // namespace tandem
