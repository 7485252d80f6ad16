// Shared-memory vs Gloo (TCP loopback) allreduce bus bandwidth on this host,
// side by side, next to the host's memcpy bandwidth measured in the same run.
//
//   bazel run -c opt //tools/bench:shm_allreduce_bench -- --worlds=2,4 --min_mb=1 --max_mb=64
//
// One process per rank (fork), as workers run. For each world size and
// transport the ranks build a ShmCommunicator or a GlooCommunicator through
// a gloo FileStore in a fresh temporary folder, check one allreduce for
// exactness, then time in-place float32 allreduces of min_mb .. max_mb
// (powers of two). An iteration's time is the slowest rank's (max-allreduce
// of the per-iteration times); the median over iterations is reported as
//   busbw = 2 (n - 1) / n * bytes / time
// (the NCCL-tests convention). Rank 0 sends its medians to the parent over a
// pipe; the parent prints one row per (world, size) with both transports.
// Two more columns on request (--transports=shm,shm_pass,shm_sumsq): the
// allreduce followed by a sum-of-squares pass over the result (what the
// allreduce strategy's non-finite check did), and AllReduceSumOfSquares
// (the sum from the reduce pass), both still counted as allreduce busbw.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/optim/clip.h"
#include "gloo/rendezvous/file_store.h"

ABSL_FLAG(std::string, worlds, "2,4", "comma-separated world sizes (processes)");
ABSL_FLAG(std::string, transports, "shm,gloo",
          "comma-separated: shm, gloo, shm_pass (+ a sum-of-squares pass), shm_sumsq (fused)");
ABSL_FLAG(int, min_mb, 1, "smallest message, MB (2^20 bytes)");
ABSL_FLAG(int, max_mb, 64, "largest message, MB");
ABSL_FLAG(double, seconds_per_size, 1.0, "target timing per size (bounds the iterations)");
ABSL_FLAG(int64_t, shm_chunk_kb, 4096, "ShmCommunicator chunk_bytes / 1024");

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
    src[i] = dst[bytes - 1 - i];
  }
  return bytes / Median(t);
}

absl::StatusOr<std::unique_ptr<Communicator>> Make(const std::string& transport, int rank,
                                                   int world, gloo::rendezvous::Store* store) {
  if (transport.rfind("shm", 0) == 0) {
    ShmOptions o;
    o.rank = rank;
    o.world_size = world;
    o.store = store;
    o.prefix = "bench";
    o.timeout = absl::Seconds(120);
    o.chunk_bytes = absl::GetFlag(FLAGS_shm_chunk_kb) << 10;
    auto c = ShmCommunicator::Create(o);
    if (!c.ok()) return c.status();
    return std::unique_ptr<Communicator>(std::move(*c));
  }
  GlooOptions o;
  o.rank = rank;
  o.world_size = world;
  o.store = store;
  o.prefix = "bench";
  o.timeout = absl::Seconds(120);
  auto c = GlooCommunicator::Create(o);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(std::move(*c));
}

// One rank's run; rank 0 writes "mb median_seconds iters" lines to `out_fd`.
int RunRank(const std::string& transport, int rank, int world, const std::string& dir,
            int out_fd) {
  gloo::rendezvous::FileStore store(dir);
  auto comm = Make(transport, rank, world, &store);
  if (!comm.ok()) {
    std::fprintf(stderr, "%s rank %d: %s\n", transport.c_str(), rank,
                 comm.status().ToString().c_str());
    return 1;
  }
  Communicator& c = **comm;
  const int64_t max_count = static_cast<int64_t>(absl::GetFlag(FLAGS_max_mb)) << 18;
  std::vector<float> data(max_count);
  std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
  if (auto s = c.AllReduce(data.data(), max_count, ReduceOp::kSum); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const float want = world * (world + 1) / 2.0f;
  for (int64_t i = 0; i < max_count; i += 4093) {
    if (data[i] != want) {
      std::fprintf(stderr, "%s rank %d: allreduce gave %g at %ld, want %g\n", transport.c_str(),
                   rank, data[i], static_cast<long>(i), want);
      return 1;
    }
  }
  for (int mb = absl::GetFlag(FLAGS_min_mb); mb <= absl::GetFlag(FLAGS_max_mb); mb *= 2) {
    const int64_t count = static_cast<int64_t>(mb) << 18;
    const double bytes = count * 4.0;
    std::fill(data.begin(), data.begin() + count, 0.f);
    for (int w = 0; w < 2; ++w) (void)c.AllReduce(data.data(), count, ReduceOp::kSum);
    const int iters = std::clamp(
        static_cast<int>(absl::GetFlag(FLAGS_seconds_per_size) * 1e9 / bytes), 5, 50);
    std::vector<float> times(iters);
    if (auto s = c.Barrier(); !s.ok()) return 1;
    double sum_sq = 0;
    for (int i = 0; i < iters; ++i) {
      const auto a = Clock::now();
      absl::Status s;
      if (transport == "shm_sumsq") {
        s = c.AllReduceSumOfSquares(data.data(), count, &sum_sq);
      } else {
        s = c.AllReduce(data.data(), count, ReduceOp::kSum);
        if (s.ok() && transport == "shm_pass") {
          sum_sq += optim::PartialSumOfSquares(absl::MakeConstSpan(data.data(), count));
        }
      }
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
      times[i] = static_cast<float>(Seconds(a, Clock::now()));
    }
    if (sum_sq < 0) return 1;  // keeps the pass
    if (auto s = c.AllReduce(times.data(), iters, ReduceOp::kMax); !s.ok()) return 1;
    if (rank == 0) {
      const double t = Median(std::vector<double>(times.begin(), times.end()));
      const std::string line =
          std::to_string(mb) + " " + std::to_string(t) + " " + std::to_string(iters) + "\n";
      if (write(out_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 1;
    }
  }
  return 0;
}

// Runs one (transport, world); returns mb -> median seconds ({} on failure).
std::map<int, double> RunWorld(const std::string& transport, int world) {
  char tmpl[] = "/tmp/tandem_shm_bench_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  int fds[2];
  if (dir == nullptr || pipe(fds) != 0) {
    std::perror("mkdtemp/pipe");
    return {};
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const int code = RunRank(transport, r, world, dir, fds[1]);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  close(fds[0]);
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  const std::string cmd = std::string("rm -rf '") + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
  std::map<int, double> medians;
  if (!ok) return medians;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    int mb = 0;
    double t = 0;
    if (f.size() >= 2 && absl::SimpleAtoi(f[0], &mb) && absl::SimpleAtod(f[1], &t)) {
      medians[mb] = t;
    }
  }
  return medians;
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
  std::vector<std::string> transports = absl::StrSplit(absl::GetFlag(FLAGS_transports), ',');
  for (const std::string& t : transports) {
    if (t != "shm" && t != "gloo" && t != "shm_pass" && t != "shm_sumsq") {
      std::fprintf(stderr, "--transports: '%s' is not shm, gloo, shm_pass or shm_sumsq\n",
                   t.c_str());
      return 2;
    }
  }
  if (absl::GetFlag(FLAGS_min_mb) < 1 || absl::GetFlag(FLAGS_max_mb) < absl::GetFlag(FLAGS_min_mb)) {
    std::fprintf(stderr, "--min_mb must be >= 1 and <= --max_mb\n");
    return 2;
  }
  const double memcpy_bw = MemcpyBandwidth(size_t{64} << 20);
  std::printf("shm_allreduce_bench: allreduce busbw, one process per rank (fork); %ld CPUs "
              "online; shm chunk %ld KB\n",
              sysconf(_SC_NPROCESSORS_ONLN), static_cast<long>(absl::GetFlag(FLAGS_shm_chunk_kb)));
  std::printf("memcpy bandwidth (64 MB, median of 20): %.3f GB/s\n", memcpy_bw / 1e9);
  std::printf("%5s %6s", "world", "MB");
  for (const std::string& t : transports) {
    std::printf(" %9s_ms %7s_GBs %6s/mcpy", t.c_str(), t.c_str(), t.c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
  int failures = 0;
  for (int world : worlds) {
    std::vector<std::map<int, double>> results;
    for (const std::string& t : transports) {
      results.push_back(RunWorld(t, world));
      if (results.back().empty()) {
        std::fprintf(stderr, "%s world %d failed\n", t.c_str(), world);
        ++failures;
      }
    }
    for (int mb = absl::GetFlag(FLAGS_min_mb); mb <= absl::GetFlag(FLAGS_max_mb); mb *= 2) {
      std::printf("%5d %6d", world, mb);
      for (const auto& r : results) {
        auto it = r.find(mb);
        if (it == r.end()) {
          std::printf(" %12s %11s %11s", "-", "-", "-");
          continue;
        }
        const double busbw = 2.0 * (world - 1) / world * (mb * 1048576.0) / it->second;
        std::printf(" %12.3f %11.3f %11.3f", it->second * 1e3, busbw / 1e9, busbw / memcpy_bw);
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
