#include "common/plan/ring_round.h"

#include <sys/wait.h>
#include <time.h>
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

// CPU seconds this process (all its threads) has used.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// What one rank reports: its median run's seconds and CPU seconds.
struct RankResult {
  int rank = -1;
  double secs = -1;
  double cpu_s = -1;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One rank: connect, one untimed allreduce, then `repetitions` + 1 timed
// runs of `allreduces` (the first dropped: connections settle); the
// seconds and this process's CPU seconds of each kept run into `secs`, `cpu`.
absl::Status RunRank(int rank, int ranks, int allreduces, int repetitions,
                     gloo::rendezvous::Store* store, std::vector<double>* secs,
                     std::vector<double>* cpu) {
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
    const double cpu0 = ProcessCpuSeconds();
    for (int k = 0; k < allreduces; ++k) RETURN_IF_ERROR(comm->AllReduce(vote, 6, ReduceOp::kSum));
    if (r > 0) {
      secs->push_back(SecondsSince(start));
      cpu->push_back(ProcessCpuSeconds() - cpu0);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RingRound> MeasureRingRound(int ranks, int allreduces, int repetitions) {
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
      std::vector<double> secs, cpu;
      const absl::Status s = RunRank(i, ranks, allreduces, repetitions, &store, &secs, &cpu);
      RankResult result;
      result.rank = i;
      if (s.ok()) result = {i, Median(secs), Median(cpu)};
      (void)!write(fds[1], &result, sizeof(result));
      _exit(s.ok() ? 0 : 1);
    }
    if (pid > 0) children.push_back(pid);
  }
  close(fds[1]);
  // Rank 0's time (every rank waits for the slowest, so they agree); the
  // CPU averaged over the ranks.
  double median = -1, cpu_s = 0;
  bool got = true;
  for (int i = 0; i < ranks && got; ++i) {
    RankResult result;
    got = read(fds[0], &result, sizeof(result)) == sizeof(result) && result.secs > 0;
    if (result.rank == 0) median = result.secs;
    cpu_s += result.cpu_s / ranks;
  }
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
  const double rounds = allreduces * (2.0 * (ranks - 1));
  return RingRound{median / rounds, std::max(0.0, cpu_s) / rounds};
}

}  // namespace plan
}  // namespace tandem
