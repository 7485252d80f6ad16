#include "tools/tandem/plan_rpc_calibrate.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/shard/shard_client.h"
#include "common/status/status_macros.h"
#include "services/shardserver/shard_server.h"

namespace tandem {
namespace cli {
namespace {

constexpr int64_t kGeneration = 1;
constexpr int kWarmUp = 3;

bool WriteAll(int fd, const void* p, size_t n) {
  return write(fd, p, n) == static_cast<ssize_t>(n);
}
bool ReadAll(int fd, void* p, size_t n) { return read(fd, p, n) == static_cast<ssize_t>(n); }

// CPU seconds this process (all its threads) has used.
double OwnCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// CPU seconds (user + system) process `pid` has used, from /proc; 0 when
// it cannot be read.
double ProcCpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  const size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream rest(line.substr(close_paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  // Fields 3.. after "(comm)": utime and stime are the 14th and 15th.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// What one worker reports: its median run's seconds, its CPU seconds over
// all its timed runs, and (worker 0) the servers' over the same runs.
struct WorkerResult {
  int worker = -1;
  double secs = -1;
  double cpu_s = 0;
  double server_cpu_s = 0;
};

// The server process: serve until `stop_fd` closes. Its port goes to `port_fd`.
int RunServer(int port_fd, int stop_fd) {
  // Its log lines (a shard per round size) are not the plan's output; a
  // server that fails shows as the measurement's error.
  const int null_fd = open("/dev/null", O_WRONLY);
  if (null_fd >= 0) dup2(null_fd, STDERR_FILENO);
  shardserver::ShardServerOptions so;
  so.report_period = absl::ZeroDuration();
  absl::StatusOr<std::unique_ptr<shardserver::ShardServer>> server =
      shardserver::ShardServer::Start(so);
  int port = server.ok() ? (*server)->port() : -1;
  if (!WriteAll(port_fd, &port, sizeof(port)) || port < 0) return 1;
  char c;
  while (read(stop_fd, &c, 1) > 0) {
  }
  (*server)->Shutdown();
  return 0;
}

// One worker: worker 0 starts the shard (then lets the others go through
// `ready_fd`), every worker pushes and pulls its chunk each round; worker 0
// times the rounds, `repetitions` runs of `round_trips`.
absl::Status RunWorker(int worker, const ShardRoundOptions& o, const std::vector<int>& ports,
                       const std::vector<pid_t>& servers, int ready_fd[2],
                       std::vector<double>* secs, WorkerResult* cpu) {
  std::vector<std::unique_ptr<shard::ShardClient>> clients;
  std::vector<std::unique_ptr<shard::PushStream>> pushes;
  for (int port : ports) {
    ASSIGN_OR_RETURN(std::unique_ptr<shard::ShardClient> client,
                     shard::ShardClient::Create(
                         {absl::StrCat("127.0.0.1:", port), "calibrate", absl::Seconds(30)}));
    pushes.push_back(client->NewPushStream());
    clients.push_back(std::move(client));
  }
  std::vector<float> params(o.floats, 1.f), grads(o.floats, 1e-3f);
  if (worker == 0) {
    shard::ShardInit init;
    init.generation = kGeneration;
    init.range = {0, o.floats};
    init.chunk_elements = o.floats;
    init.world_size = o.workers;
    init.optimizer.set_name("sgd");
    init.apply_per_chunk = true;
    for (auto& client : clients) RETURN_IF_ERROR(client->Init(init, params.data()).status());
    const std::string go(o.workers - 1, 'g');
    if (!go.empty() && !WriteAll(ready_fd[1], go.data(), go.size())) {
      return absl::UnavailableError("shard round: signalling the workers failed");
    }
  } else {
    char c;
    if (!ReadAll(ready_fd[0], &c, 1)) return absl::UnavailableError("shard round: worker 0 gone");
  }
  const shard::Chunk chunk{0, o.floats, 0};
  int64_t step = 0;
  // A chunk to every server, then every pull (each waits for the round).
  auto round = [&]() -> absl::Status {
    shard::PushHeader h;
    h.generation = kGeneration;
    h.step = ++step;
    h.rank = worker;
    h.learning_rate = 1e-3;
    for (auto& push : pushes) {
      RETURN_IF_ERROR(push->Open(h));
      RETURN_IF_ERROR(push->Write(chunk, grads.data()));
      RETURN_IF_ERROR(push->Finish().status());
    }
    for (auto& client : clients) {
      RETURN_IF_ERROR(client->Pull(kGeneration, step, 0, o.floats, params.data()));
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < kWarmUp; ++i) RETURN_IF_ERROR(round());
  auto servers_cpu = [&servers, worker]() {
    double sum = 0;
    for (pid_t pid : servers) sum += worker == 0 ? ProcCpuSeconds(pid) : 0;
    return sum;
  };
  const double cpu0 = OwnCpuSeconds(), server0 = servers_cpu();
  for (int r = 0; r < o.repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.round_trips; ++i) RETURN_IF_ERROR(round());
    secs->push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  cpu->cpu_s = OwnCpuSeconds() - cpu0;
  cpu->server_cpu_s = servers_cpu() - server0;
  return absl::OkStatus();
}

// A forked worker's whole life: its timed rounds, then its median and CPU
// written to `result_fd`. Returns the child's exit code.
int WorkerChild(int w, const ShardRoundOptions& o, const std::vector<int>& ports,
                const std::vector<pid_t>& server_pids, int ready_pipe[2], int result_fd) {
  std::vector<double> secs;
  WorkerResult result;
  const absl::Status s = RunWorker(w, o, ports, server_pids, ready_pipe, &secs, &result);
  if (!s.ok()) {
    fprintf(stderr, "calibrate: shard round worker %d: %s\n", w, s.ToString().c_str());
  }
  result.worker = w;
  if (s.ok()) {
    std::sort(secs.begin(), secs.end());
    result.secs = secs[secs.size() / 2];
  }
  (void)!WriteAll(result_fd, &result, sizeof(result));
  return s.ok() ? 0 : 1;
}

}  // namespace

absl::StatusOr<ShardRound> MeasureShardRound(const ShardRoundOptions& o) {
  if (o.workers < 1 || o.floats < 1 || o.round_trips < 1 || o.repetitions < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibrate: a shard round needs >= 1 worker, float, round trip and repetition, got ",
        o.workers, ", ", o.floats, ", ", o.round_trips, ", ", o.repetitions));
  }
  int port_pipe[2], stop_pipe[2], ready_pipe[2], result_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(stop_pipe) != 0 || pipe(ready_pipe) != 0 ||
      pipe(result_pipe) != 0) {
    return absl::UnavailableError("calibrate: pipe failed");
  }
  std::vector<pid_t> children;
  const int servers = std::max(1, o.workers / 2);
  std::vector<int> ports;
  for (int i = 0; i < servers; ++i) {
    const pid_t server = fork();
    if (server == 0) {
      for (int fd : {stop_pipe[1], ready_pipe[0], ready_pipe[1], result_pipe[0], result_pipe[1]}) {
        close(fd);
      }
      _exit(RunServer(port_pipe[1], stop_pipe[0]));
    }
    int port = -1;
    if (server > 0) children.push_back(server);
    if (server > 0 && ReadAll(port_pipe[0], &port, sizeof(port)) && port > 0) ports.push_back(port);
  }
  close(stop_pipe[0]);
  const size_t server_children = children.size();
  const bool servers_up = static_cast<int>(ports.size()) == servers;
  const std::vector<pid_t> server_pids(children.begin(), children.end());
  for (int w = 0; w < o.workers && servers_up; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(stop_pipe[1]);
      close(result_pipe[0]);
      _exit(WorkerChild(w, o, ports, server_pids, ready_pipe, result_pipe[1]));
    }
    if (pid > 0) children.push_back(pid);
  }
  close(result_pipe[1]);
  // Worker 0's time; every worker's CPU and the servers' (worker 0 read
  // them over its timed runs).
  double median = -1, cpu_s = 0;
  bool got = servers_up;
  for (int w = 0; w < o.workers && got; ++w) {
    WorkerResult result;
    got = ReadAll(result_pipe[0], &result, sizeof(result)) && result.secs > 0;
    if (result.worker == 0) median = result.secs;
    cpu_s += result.cpu_s + result.server_cpu_s;
  }
  bool all_ok = static_cast<int>(children.size()) == o.workers + servers;
  if (!got || !(median > 0)) {
    // A failed worker 0 leaves the others waiting for it: end them all.
    for (pid_t pid : children) kill(pid, SIGKILL);
  }
  // The workers first (after the servers in `children`): the others may
  // still be pulling their last round when worker 0 is done.
  auto reap = [&](size_t from, size_t to) {
    for (size_t i = from; i < to && i < children.size(); ++i) {
      int status = 0;
      waitpid(children[i], &status, 0);
      all_ok = all_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
  };
  reap(server_children, children.size());
  close(stop_pipe[1]);  // the servers stop
  reap(0, server_children);
  for (int fd : {port_pipe[0], port_pipe[1], ready_pipe[0], ready_pipe[1], result_pipe[0]}) {
    close(fd);
  }
  if (!got || !all_ok || !(median > 0)) {
    return absl::UnavailableError(absl::StrCat(
        "calibrate: the shard-server round of ", o.workers,
        " worker process(es) over loopback failed"));
  }
  const double calls = static_cast<double>(o.round_trips) * o.repetitions * o.workers * servers;
  return ShardRound{median / o.round_trips / servers, cpu_s / calls};
}

}  // namespace cli
}  // namespace tandem
