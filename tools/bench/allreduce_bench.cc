// Gloo allreduce bus bandwidth on this host, next to the host's memcpy
// bandwidth measured in the same run.
//
//   bazel run -c opt //tools/bench:allreduce_bench -- --worlds=2,4 --min_mb=1 --max_mb=64
//
// One process per rank (fork), as workers run: each rank builds a
// GlooCommunicator (TCP over loopback) through a gloo FileStore in a fresh
// temporary folder, then times in-place float32 allreduces of 1 MB .. 64 MB
// (powers of two). A rank's time for one iteration is the slowest rank's
// (an allreduce of the per-iteration times with max); the median over the
// iterations is reported as
//   algbw = bytes / time,  busbw = 2 (n - 1) / n * bytes / time
// (the NCCL-tests convention: busbw is the per-rank traffic of a ring
// allreduce, comparable with a link's or memory's bandwidth). memcpy
// bandwidth is bytes copied per second (64 MB buffers, median of 20) in the
// parent before forking; the last column is busbw / memcpy.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "gloo/rendezvous/file_store.h"

ABSL_FLAG(std::string, worlds, "2,4", "comma-separated world sizes (processes)");
ABSL_FLAG(int, min_mb, 1, "smallest message, MB (2^20 bytes)");
ABSL_FLAG(int, max_mb, 64, "largest message, MB");
ABSL_FLAG(double, seconds_per_size, 1.0, "target timing per size (bounds the iterations)");

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double MemcpyBandwidth(size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> t;
  for (int i = 0; i < 21; ++i) {
    const auto a = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const auto b = Clock::now();
    if (i > 0) t.push_back(Seconds(a, b));  // the first pass faults pages in
    src[i] = dst[bytes - 1 - i];             // keep the copies observable
  }
  return bytes / Median(t);
}

// One rank's whole run; rank 0 prints. Returns the process exit code.
int RunRank(int rank, int world, const std::string& dir, double memcpy_bw) {
  gloo::rendezvous::FileStore store(dir);
  GlooOptions o;
  o.rank = rank;
  o.world_size = world;
  o.store = &store;
  o.prefix = "bench";
  o.timeout = absl::Seconds(120);
  auto comm = GlooCommunicator::Create(o);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().ToString().c_str());
    return 1;
  }
  Communicator& c = **comm;
  const int64_t max_count = static_cast<int64_t>(absl::GetFlag(FLAGS_max_mb)) << 18;
  std::vector<float> data(max_count);

  // Correctness first: every rank contributes rank + 1.
  std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
  if (auto s = c.AllReduce(data.data(), max_count, ReduceOp::kSum); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const float want = world * (world + 1) / 2.0f;
  if (data.front() != want || data.back() != want || data[max_count / 2] != want) {
    std::fprintf(stderr, "rank %d: allreduce gave %g, want %g\n", rank, data.front(), want);
    return 1;
  }

  for (int mb = absl::GetFlag(FLAGS_min_mb); mb <= absl::GetFlag(FLAGS_max_mb); mb *= 2) {
    const int64_t count = static_cast<int64_t>(mb) << 18;
    const double bytes = count * 4.0;
    std::fill(data.begin(), data.begin() + count, 0.f);
    for (int w = 0; w < 2; ++w) (void)c.AllReduce(data.data(), count, ReduceOp::kSum);
    // Iterations from a rough estimate at 1 GB/s, 3 to 50.
    const int iters = std::clamp(
        static_cast<int>(absl::GetFlag(FLAGS_seconds_per_size) * 1e9 / bytes), 3, 50);
    std::vector<float> times(iters);
    if (auto s = c.Barrier(); !s.ok()) return 1;
    for (int i = 0; i < iters; ++i) {
      const auto a = Clock::now();
      if (auto s = c.AllReduce(data.data(), count, ReduceOp::kSum); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      times[i] = static_cast<float>(Seconds(a, Clock::now()));
    }
    if (auto s = c.AllReduce(times.data(), iters, ReduceOp::kMax); !s.ok()) return 1;
    if (rank == 0) {
      const double t = Median(std::vector<double>(times.begin(), times.end()));
      const double busbw = 2.0 * (world - 1) / world * bytes / t;
      std::printf("%5d %6d %6d %10.3f %10.3f %10.3f %10.3f %8.3f\n", world, mb, iters, t * 1e3,
                  bytes / t / 1e9, busbw / 1e9, memcpy_bw / 1e9, busbw / memcpy_bw);
      std::fflush(stdout);
    }
  }
  return 0;
}

int Main() {
  std::vector<int> worlds;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_worlds), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 2) {
      std::fprintf(stderr, "--worlds: '%s' is not a world size >= 2\n", std::string(w).c_str());
      return 2;
    }
    worlds.push_back(n);
  }
  if (absl::GetFlag(FLAGS_min_mb) < 1 || absl::GetFlag(FLAGS_max_mb) < absl::GetFlag(FLAGS_min_mb)) {
    std::fprintf(stderr, "--min_mb must be >= 1 and <= --max_mb\n");
    return 2;
  }
  const double memcpy_bw = MemcpyBandwidth(size_t{64} << 20);
  std::printf("allreduce_bench: Gloo ring allreduce, one process per rank (fork), TCP loopback; "
              "%ld CPUs online\n", sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("memcpy bandwidth (64 MB, median of 20): %.3f GB/s\n", memcpy_bw / 1e9);
  std::printf("%5s %6s %6s %10s %10s %10s %10s %8s\n", "world", "MB", "iters", "median_ms",
              "algbw_GBs", "busbw_GBs", "memcpy_GBs", "bus/mcpy");
  std::fflush(stdout);
  int failures = 0;
  for (int world : worlds) {
    char tmpl[] = "/tmp/tandem_allreduce_bench_XXXXXX";
    const char* dir = mkdtemp(tmpl);
    if (dir == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    std::vector<pid_t> pids;
    for (int r = 0; r < world; ++r) {
      const pid_t pid = fork();
      if (pid < 0) {
        std::perror("fork");
        return 1;
      }
      if (pid == 0) {
        const int code = RunRank(r, world, dir, memcpy_bw);
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(code);
      }
      pids.push_back(pid);
    }
    for (pid_t pid : pids) {
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    }
    // The store's files: one per key; remove them and the folder.
    const std::string cmd = std::string("rm -rf '") + dir + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
  }
  if (failures > 0) {
    std::fprintf(stderr, "%d rank process(es) failed\n", failures);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
