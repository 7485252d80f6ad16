// ps_chunk_bench: the CPU one ps / hybrid chunk costs, worker side and
// shard-server side apart. The real path end to end: W worker threads, each
// with its own RemoteShards (push lanes, pull lanes, ShardClient), against
// S real shard servers (ShardServer: gRPC service, RangeStore, apply
// threads), each server a forked process, over loopback TCP.
//
//   bazel run -c opt //tools/bench:ps_chunk_bench -- --workers=2 --chunk_kb=256
//   perf record -g bazel-bin/tools/bench/ps_chunk_bench ...   # where it goes
//
// Every step each worker pushes every chunk (ps: push_stride 1) and pulls
// it back once its server has applied it (apply_per_chunk, SGD, no
// replicas: hybrid's configuration at chunk_mb 0.25). Prints, over the
// measured steps, wall ms per step and CPU microseconds per chunk push +
// pull (one worker's chunk): the workers' process (RUSAGE_SELF) and the
// servers' processes (/proc/PID/stat), so load moves the wall time but
// hardly the CPU. The servers are forked before any gRPC object exists.
// A RESULT line repeats the numbers for tools/bench/ab_interleave.py.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/shard/remote_shards.h"
#include "services/shardserver/shard_server.h"

ABSL_FLAG(int, workers, 2, "worker threads (world size)");
ABSL_FLAG(int, servers, 1, "shard-server processes");
ABSL_FLAG(int, chunk_kb, 256, "chunk size, KiB of fp32");
ABSL_FLAG(int, chunks, 16, "chunks per server");
ABSL_FLAG(int, steps, 60, "measured steps (after 5 warm-up steps)");
ABSL_FLAG(int, streams, 2, "push lanes per server");
ABSL_FLAG(int, pull_streams, 2, "pull lanes per server");
ABSL_FLAG(int, window_kb, 64, "the servers' HTTP/2 window for pushes, KiB (0 = auto-tuned)");

namespace tandem {
namespace {

struct Child {
  pid_t pid = 0;
  int stop_fd = -1;  // closing it ends the server
  std::string address;
};

// Forks a shard server; it prints its address on a pipe and lives until
// stop_fd closes. `earlier`: the servers forked before (the child closes
// its copies of their stop pipes, or they would never see theirs close).
Child ForkServer(int window_bytes, const std::vector<Child>& earlier) {
  int addr_pipe[2], stop_pipe[2];
  if (pipe(addr_pipe) != 0 || pipe(stop_pipe) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(addr_pipe[0]);
    close(stop_pipe[1]);
    for (const Child& c : earlier) close(c.stop_fd);
    shardserver::ShardServerOptions o;
    o.report_period = absl::ZeroDuration();
    o.flow_window_bytes = window_bytes;
    auto server = shardserver::ShardServer::Start(o);
    if (!server.ok()) {
      std::fprintf(stderr, "server: %s\n", server.status().ToString().c_str());
      _exit(1);
    }
    const std::string a = (*server)->address() + "\n";
    if (write(addr_pipe[1], a.data(), a.size()) != static_cast<ssize_t>(a.size())) _exit(1);
    close(addr_pipe[1]);
    char c;
    while (read(stop_pipe[0], &c, 1) > 0) {
    }
    (*server)->Shutdown();
    _exit(0);
  }
  close(addr_pipe[1]);
  close(stop_pipe[0]);
  Child child{pid, stop_pipe[1], ""};
  char buf[128];
  ssize_t n;
  while ((n = read(addr_pipe[0], buf, sizeof(buf))) > 0) child.address.append(buf, n);
  close(addr_pipe[0]);
  while (!child.address.empty() && child.address.back() == '\n') child.address.pop_back();
  return child;
}

// utime + stime of a process, seconds.
double ProcessCpu(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(f, line);
  // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
  std::istringstream in(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / sysconf(_SC_CLK_TCK);
}

double SelfCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// One worker's steps [first, last].
void RunWorker(shard::RemoteShards* r, int rank, int64_t first, int64_t last,
               std::vector<float>* grads, std::vector<float>* params) {
  for (int64_t step = first; step <= last; ++step) {
    shard::PushHeader h;
    h.generation = 1;
    h.step = step;
    h.rank = rank;
    h.learning_rate = 1e-3;
    Check(r->BeginPushes(h), "BeginPushes");
    for (int c = 0; c < r->layout().num_chunks(); ++c) {
      r->Push(c, grads->data() + r->layout().chunk(c).lo);
      r->Pull(c, step, params->data());
    }
    r->ClosePushes();
    Check(r->WaitPushes(), "WaitPushes");
    Check(r->WaitAllPulls(), "WaitAllPulls");
  }
}

int Main() {
  const int workers = absl::GetFlag(FLAGS_workers), servers = absl::GetFlag(FLAGS_servers);
  const int64_t chunk = int64_t{absl::GetFlag(FLAGS_chunk_kb)} * 1024 / 4;
  const int64_t size = chunk * absl::GetFlag(FLAGS_chunks) * servers;
  const int steps = absl::GetFlag(FLAGS_steps);
  constexpr int kWarmup = 5;
  std::vector<Child> children;
  for (int s = 0; s < servers; ++s) children.push_back(ForkServer(absl::GetFlag(FLAGS_window_kb) * 1024, children));
  std::vector<std::unique_ptr<shard::RemoteShards>> ranks;
  std::vector<std::vector<float>> grads(workers, std::vector<float>(size, 1e-3f));
  std::vector<std::vector<float>> params(workers, std::vector<float>(size, 0.5f));
  for (int w = 0; w < workers; ++w) {
    shard::RemoteShardsOptions o;
    for (const Child& c : children) o.addresses.push_back(c.address);
    o.job_id = "bench";
    o.generation = 1;
    o.rank = w;
    o.world_size = workers;
    o.size = size;
    o.chunk_elements = chunk;
    o.streams_per_server = absl::GetFlag(FLAGS_streams);
    o.pull_streams_per_server = absl::GetFlag(FLAGS_pull_streams);
    o.apply_per_chunk = true;
    auto r = shard::RemoteShards::Create(o);
    Check(r.status(), "RemoteShards::Create");
    ranks.push_back(std::move(*r));
  }
  v1::OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(1e-3);
  Check(ranks[0]->InitServers(0, sgd, params[0].data()), "InitServers");
  auto run = [&](int64_t first, int64_t last) {
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back(RunWorker, ranks[w].get(), w, first, last, &grads[w], &params[w]);
    }
    for (std::thread& t : threads) t.join();
  };
  run(1, kWarmup);
  const double self0 = SelfCpu();
  double server0 = 0;
  for (const Child& c : children) server0 += ProcessCpu(c.pid);
  const absl::Time t0 = absl::Now();
  run(kWarmup + 1, kWarmup + steps);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const double self = SelfCpu() - self0;
  double server = -server0;
  for (const Child& c : children) server += ProcessCpu(c.pid);
  const double per_chunk = 1e6 / (static_cast<double>(steps) * workers * ranks[0]->layout().num_chunks());
  double load[1] = {0};
  getloadavg(load, 1);
  std::printf(
      "window %d KiB workers %d servers %d chunk %lld KiB chunks/step %d: %.2f ms/step; CPU us per chunk "
      "push+pull: workers %.0f, servers %.0f, total %.0f (load %.1f)\n",
      absl::GetFlag(FLAGS_window_kb), workers, servers, static_cast<long long>(chunk * 4 / 1024), ranks[0]->layout().num_chunks(),
      1e3 * wall / steps, self * per_chunk, server * per_chunk, (self + server) * per_chunk,
      load[0]);
  // For tools/bench/ab_interleave.py.
  std::printf("RESULT ps_chunk step_ms=%.3f worker_us=%.1f server_us=%.1f total_us=%.1f\n",
              1e3 * wall / steps, self * per_chunk, server * per_chunk,
              (self + server) * per_chunk);
  ranks.clear();
  for (Child& c : children) {
    close(c.stop_fd);
    waitpid(c.pid, nullptr, 0);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
