#include "common/plan/ring_round.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/status/status_macros.h"
#include "common/timing/seconds_since.h"
#include "gloo/rendezvous/file_store.h"

namespace tandem {
namespace plan {
namespace {

// One rank: connect, one untimed allreduce, then `repetitions` + 1 timed
// runs of `allreduces` (the first dropped: connections settle); the
// seconds of each kept run into `secs`.
absl::Status RunRank(int rank, int ranks, int allreduces, int repetitions,
                     gloo::rendezvous::Store* store, std::vector<double>* secs) {
  GlooOptions o;
  o.rank = rank;
  o.world_size = ranks;
  o.store = store;
  o.prefix = "calibrate";
  o.timeout = absl::Seconds(30);
  ASSIGN_OR_RETURN(std::unique_ptr<GlooCommunicator> comm, GlooCommunicator::Create(o));
  float vote[6] = {1, 2, 3, 4, 5, 6};
  RETURN_IF_ERROR(comm->AllReduce(vote, 6, ReduceOp::kSum));
  for (int r = 0; r <= repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < allreduces; ++k) RETURN_IF_ERROR(comm->AllReduce(vote, 6, ReduceOp::kSum));
    if (r > 0) secs->push_back(SecondsSince(start));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> MeasureRingRound(int ranks, int allreduces, int repetitions) {
  if (ranks < 2 || allreduces < 1 || repetitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibrate: a ring round needs >= 2 ranks, >= 1 allreduce and >= 1 repetition, got ",
        ranks, ", ", allreduces, ", ", repetitions));
  }
  // Processes, as tandem's workers are (threads of one process measured
  // several times slower rounds here), meeting through a file store.
  std::error_code ec;
  std::string pattern = std::filesystem::temp_directory_path(ec).string();
  if (ec) pattern = "/tmp";
  pattern += "/tandem-calibrate-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  char* dir = buf.data();
  if (mkdtemp(dir) == nullptr) {
    return absl::UnavailableError(absl::StrCat("calibrate: mkdtemp: ", std::strerror(errno)));
  }
  int fds[2];
  if (pipe(fds) != 0) return absl::UnavailableError("calibrate: pipe failed");
  std::vector<pid_t> children;
  for (int i = 0; i < ranks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      gloo::rendezvous::FileStore store(dir);
      std::vector<double> secs;
      const absl::Status s = RunRank(i, ranks, allreduces, repetitions, &store, &secs);
      double median = -1;
      if (s.ok()) {
        std::sort(secs.begin(), secs.end());
        median = secs[secs.size() / 2];
      }
      // Rank 0's runs: every rank waits for the slowest, so they agree.
      if (i == 0 || !s.ok()) (void)!write(fds[1], &median, sizeof(median));
      _exit(s.ok() ? 0 : 1);
    }
    if (pid > 0) children.push_back(pid);
  }
  close(fds[1]);
  double median = -1;
  const bool got = read(fds[0], &median, sizeof(median)) == sizeof(median);
  close(fds[0]);
  bool all_ok = static_cast<int>(children.size()) == ranks;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::filesystem::remove_all(dir, ec);
  if (!got || !all_ok || !(median > 0)) {
    return absl::UnavailableError(absl::StrCat("calibrate: the ", ranks,
                                               "-process Gloo ring over loopback failed"));
  }
  return median / allreduces / (2.0 * (ranks - 1));
}

}  // namespace plan
}  // namespace tandem
