// AllreduceSync in a training step: ms/step and how much of the allreduce
// time backward hides, with buckets (overlap) against one bucket for the
// whole gradient (issued only after backward: no overlap).
//
//   bazel run -c opt //tools/bench:allreduce_sync_bench -- --world=2
//       [--model=mlp:784,1024,1024,10 --batch=64 --steps=20]
//
// One process per rank (fork), Gloo over TCP loopback through a FileStore
// in a fresh temporary folder, CPU backend with one OpenBLAS thread per
// rank, synthetic data, SGD with momentum. Rank 0 prints one row per bucket
// cap: ms/step (median), global samples/s, the communication thread's busy
// time per step, the part of it FinishStep still waited for (exposed), and
// hidden = 1 - exposed / comm.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/sgd.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "gloo/rendezvous/file_store.h"

ABSL_FLAG(int, world, 2, "ranks (processes)");
ABSL_FLAG(std::string, model, "mlp:784,1024,1024,10", "model spec");
ABSL_FLAG(int, batch, 64, "per-rank batch");
ABSL_FLAG(int, steps, 20, "timed steps per configuration (after 3 warm-up steps)");
ABSL_FLAG(std::string, bucket_caps_mb, "1,4,25,100000",
          "bucket caps to compare; a huge cap = one bucket = no overlap");

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

// One bucket cap: AllreduceSync over `comm`, timed steps; rank 0 prints
// the row.
int BenchCap(Communicator* comm, nn::Model& m, const nn::Batch& b, double cap, int rank,
             int world) {
  const int batch = b.size;
  sync::AllreduceSyncOptions o;
  o.comm = comm;
  o.params = m.storage().params();
  o.grads = m.storage().grads();
  o.size = m.storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(m.layout())) o.ready_ranges.push_back({r.lo, r.hi});
  o.bucket_cap_mb = cap;
  optim::SgdOptions so;
  so.momentum = 0.9f;
  o.optimizer = *optim::Sgd::Create({0, o.size}, so);
  auto created = sync::CreateAllreduceSync(std::move(o));
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  sync::GradientSync& s = **created;
  const nn::GradReadyCallback on_ready = [&s](const nn::GradRange& r) {
    s.OnGradientsReady(r.lo, r.hi);
  };
  const int steps = absl::GetFlag(FLAGS_steps);
  std::vector<double> times;
  sync::SyncStats before;
  int buckets_per_step = 0;
  for (int step = 1; step <= 3 + steps; ++step) {
    if (step == 4) before = s.stats();
    const auto t0 = Clock::now();
    absl::Status st = m.Forward(b);
    if (st.ok()) st = s.BeginStep({});
    if (st.ok()) st = m.Backward(0.f, on_ready);
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = 0.01f;
    if (st.ok()) st = s.FinishStep(ctx);
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
      return 1;
    }
    if (step > 3) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const sync::SyncStats after = s.stats();
  buckets_per_step = static_cast<int>((after.buckets - before.buckets) / steps);
  std::sort(times.begin(), times.end());
  const double t = times[times.size() / 2];
  const double comm_s = (after.comm_seconds - before.comm_seconds) / steps;
  const double exposed = (after.exposed_wait_seconds - before.exposed_wait_seconds) / steps;
  if (rank == 0) {
    std::printf("%5d %9.0f %7d %9.2f %10.0f %9.2f %11.2f %7.0f%%\n", world, cap,
                buckets_per_step, t * 1e3, world * batch / t, comm_s * 1e3, exposed * 1e3,
                comm_s > 0 ? 100.0 * (1.0 - exposed / comm_s) : 0.0);
    std::fflush(stdout);
  }
  return 0;
}

int RunRank(int rank, int world, const std::string& dir, const std::vector<double>& caps) {
  gloo::rendezvous::FileStore store(dir);
  GlooOptions go;
  go.rank = rank;
  go.world_size = world;
  go.store = &store;
  auto comm = GlooCommunicator::Create(go);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().ToString().c_str());
    return 1;
  }
  kernels::CpuBackend backend;
  const int batch = absl::GetFlag(FLAGS_batch);
  nn::ModelOptions mo;
  mo.max_batch = batch;
  auto model = nn::CreateModel(absl::GetFlag(FLAGS_model), &backend, mo);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  nn::Model& m = **model;
  if (m.spec().kind != nn::ModelSpec::Kind::kMlp) {
    std::fprintf(stderr, "--model: only mlp specs are supported here\n");
    return 1;
  }
  const int in = m.spec().mlp.widths.front(), classes = m.spec().mlp.widths.back();
  std::mt19937 rng(rank + 1);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(batch) * in);
  std::vector<int32_t> y(batch);
  for (float& v : x) v = normal(rng);
  for (int32_t& v : y) v = static_cast<int32_t>(rng() % classes);
  nn::Batch b;
  b.size = batch;
  b.features = x.data();
  b.labels = y.data();

  for (double cap : caps) {
    if (int rc = BenchCap(comm->get(), m, b, cap, rank, world); rc != 0) return rc;
  }
  return 0;
}

int Main() {
  const int world = absl::GetFlag(FLAGS_world);
  if (world < 1) {
    std::fprintf(stderr, "--world must be >= 1\n");
    return 2;
  }
  std::vector<double> caps;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_bucket_caps_mb), ',')) {
    double v = 0;
    if (!absl::SimpleAtod(c, &v) || !(v > 0)) {
      std::fprintf(stderr, "--bucket_caps_mb: '%s' is not a positive number\n",
                   std::string(c).c_str());
      return 2;
    }
    caps.push_back(v);
  }
  std::printf("allreduce_sync_bench: %s, batch %d per rank, one process per rank (fork), "
              "Gloo TCP loopback, %ld CPUs online\n",
              absl::GetFlag(FLAGS_model).c_str(), absl::GetFlag(FLAGS_batch),
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%5s %9s %7s %9s %10s %9s %11s %8s\n", "world", "cap_MB", "buckets", "ms/step",
              "samples/s", "comm_ms", "exposed_ms", "hidden");
  std::fflush(stdout);
  char tmpl[] = "/tmp/tandem_allreduce_sync_bench_XXXXXX";
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
      const int code = RunRank(r, world, dir, caps);
      std::fflush(stdout);
      _exit(code);
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  const std::string cmd = std::string("rm -rf '") + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
