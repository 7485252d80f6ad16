// zero2's communication on one node against the shm allreduce it replaces,
// side by side: one process per rank (fork) over one ShmCommunicator, the
// flat vector of a model (default mlp:784,1024,1024,10: 1,863,690 floats)
// as one gradient bucket, and per step, interleaved round-robin:
//
//   allreduce      AllReduce(grads, n) (the allreduce strategy's bucket)
//   zero2 packed   OwnerReduce with packing into N equal blocks and
//                  ReduceScatter, the gradient-norm allgather every zero
//                  step makes (GradClip::Combine: 16 bytes per rank, for
//                  the non-finite check and clipping), then the gather
//                  rounds zero2 ran before
//                  (gather_mb / N floats of every shard per round: copy the
//                  own part into staging, AllGather, copy the others out)
//   zero2 pieces   OwnerReduce over shm pieces (ReduceScatterPieces), the
//                  norm allgather, and one OneNodePieces::Gather
//                  (AllGatherPieces) of the slices
//
// Printed per variant: the median over steps of the slowest rank's wall ms
// and of the ranks' summed thread CPU ms (the measure that holds up on a
// loaded machine). Segment barriers per step at the defaults: allreduce 4
// (2 chunks), zero2 packed 2 x 2 + 2 + 8 rounds x 2 = 22, zero2 pieces
// 2 x 2 + 2 + 2 = 8.
//
//   bazel run -c opt //tools/bench:zero_one_node_bench -- --world=4 --steps=60
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/shard/zero_shard_map.h"
#include "common/sync/zero/one_node_pieces.h"
#include "common/sync/zero/zero_parts.h"
#include "gloo/rendezvous/file_store.h"

ABSL_FLAG(int, world, 4, "ranks (processes)");
ABSL_FLAG(int64_t, floats, 1863690, "flat vector length (default: mlp:784,1024,1024,10)");
ABSL_FLAG(int, steps, 60, "timed steps per variant (after 3 warm-up steps)");
ABSL_FLAG(double, gather_mb, 1, "zero2 packed: MiB per gather round over all shards");
ABSL_FLAG(int64_t, shm_chunk_kb, 4096, "ShmCommunicator chunk_bytes / 1024 (the worker's default)");

namespace tandem {
namespace {

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunRank(int rank, int world, const std::string& dir) {
  gloo::rendezvous::FileStore store(dir);
  ShmOptions o;
  o.rank = rank;
  o.world_size = world;
  o.store = &store;
  o.prefix = "zero_bench";
  o.chunk_bytes = absl::GetFlag(FLAGS_shm_chunk_kb) << 10;
  auto made = ShmCommunicator::Create(o);
  if (!made.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, made.status().ToString().c_str());
    return 1;
  }
  ShmCommunicator& comm = **made;
  const int64_t n = absl::GetFlag(FLAGS_floats);
  const shard::ZeroShardMap map(n, world);
  const std::vector<sync::Bucket> plan = {sync::Bucket{0, n, 0, 1}};
  sync::OwnerReduce packed(map, rank, plan);
  sync::OwnerReduce pieces(map, rank, plan, &comm);
  std::unique_ptr<sync::OneNodePieces> gather = sync::OneNodePieces::Create(&comm, map);
  std::vector<float> grads(n), params(n, 1.f), shard(map.shard_size());
  const int64_t chunk = std::max<int64_t>(
      1, std::min<int64_t>(map.shard_size(),
                           static_cast<int64_t>(absl::GetFlag(FLAGS_gather_mb) * (1 << 18)) / world));
  std::vector<float> staging(chunk * world);
  int64_t bytes = 0;
  double norm_in[2] = {1.0, -1.0}, norm_out[2 * 64];
  auto norm = [&] { return comm.AllGather(norm_in, norm_out, sizeof(norm_in)); };
  // zero2's rounds before this change (zero_sync.cc GatherRound).
  auto rounds = [&]() -> absl::Status {
    for (int64_t off = 0; off < map.shard_size(); off += chunk) {
      const int64_t c = std::min(chunk, map.shard_size() - off);
      const int64_t first = rank * map.shard_size() + off;
      const int64_t real = std::clamp<int64_t>(n - first, 0, c);
      std::memcpy(staging.data() + rank * c, params.data() + first, real * sizeof(float));
      std::fill(staging.data() + rank * c + real, staging.data() + (rank + 1) * c, 0.f);
      absl::Status s = comm.AllGather(staging.data() + rank * c, staging.data(), c * 4);
      if (!s.ok()) return s;
      for (int j = 0; j < world; ++j) {
        const int64_t got = std::clamp<int64_t>(n - (j * map.shard_size() + off), 0, c);
        if (j != rank && got > 0) {
          std::memcpy(params.data() + j * map.shard_size() + off, staging.data() + j * c, got * 4);
        }
      }
    }
    return absl::OkStatus();
  };
  const std::vector<std::pair<const char*, std::function<absl::Status()>>> variants = {
      {"allreduce", [&] { return comm.AllReduce(grads.data(), n); }},
      {"zero2 packed",
       [&]() -> absl::Status {
         absl::Status s = packed.Run(comm, grads.data(), 0, 0, n, shard.data(), &bytes);
         if (s.ok()) s = norm();
         return s.ok() ? rounds() : s;
       }},
      {"zero2 pieces", [&]() -> absl::Status {
         absl::Status s = pieces.Run(comm, grads.data(), 0, 0, n, shard.data(), &bytes);
         if (s.ok()) s = norm();
         return s.ok() ? gather->Gather(params.data(), 0, n, &bytes) : s;
       }}};
  const int steps = absl::GetFlag(FLAGS_steps);
  const int v = static_cast<int>(variants.size());
  std::vector<float> wall(v * steps), cpu(v * steps);
  for (int step = -3; step < steps; ++step) {
    for (int k = 0; k < v; ++k) {
      for (int64_t i = 0; i < n; i += 1024) grads[i] = static_cast<float>(rank + step);
      if (!comm.Barrier().ok()) return 1;
      const double w0 = WallSeconds(), c0 = ThreadCpuSeconds();
      if (absl::Status s = variants[k].second(); !s.ok()) {
        std::fprintf(stderr, "rank %d %s: %s\n", rank, variants[k].first, s.ToString().c_str());
        return 1;
      }
      if (step >= 0) {
        wall[k * steps + step] = static_cast<float>(1e3 * (WallSeconds() - w0));
        cpu[k * steps + step] = static_cast<float>(1e3 * (ThreadCpuSeconds() - c0));
      }
    }
  }
  if (!comm.AllReduce(wall.data(), wall.size(), ReduceOp::kMax).ok()) return 1;
  if (!comm.AllReduce(cpu.data(), cpu.size(), ReduceOp::kSum).ok()) return 1;
  if (rank == 0) {
    std::printf("%d ranks over shm, %ld floats, %d steps per variant (interleaved), medians:\n",
                world, static_cast<long>(n), steps);
    std::printf("%-14s %16s %22s\n", "variant", "wall ms (max)", "CPU ms (all ranks)");
    for (int k = 0; k < v; ++k) {
      std::vector<float> w(wall.begin() + k * steps, wall.begin() + (k + 1) * steps);
      std::vector<float> c(cpu.begin() + k * steps, cpu.begin() + (k + 1) * steps);
      std::printf("%-14s %16.2f %22.2f\n", variants[k].first, Median(w), Median(c));
    }
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int world = absl::GetFlag(FLAGS_world);
  char dir[] = "/tmp/zero_one_node_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr || world < 2 || world > 64) {
    std::fprintf(stderr, "zero_one_node_bench: need 2 <= --world <= 64 and a writable /tmp\n");
    return 1;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int rc = tandem::RunRank(r, world, dir);
      std::fflush(stdout);  // _exit does not flush
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed == 0 ? 0 : 1;
}
