// Where one worker's training step goes: the CPU MLP step of `tandem local`
// (AllreduceSync with SGD momentum over a ShmCommunicator or Gloo, a 3-float
// control allreduce per step, the loss read back per micro-step), split
// into data / forward / backward / allreduce wait / optimizer / control.
//
//   bazel build //tools/bench:mlp_breakdown_bench
//   mlp_breakdown_bench [--world=2] [--transport=shm|gloo] [--model=mlp:784,1024,1024,10]
//                       [--batch=64] [--steps=60] [--bucket_cap_mb=25] [--chunk_kb=4096]
//                       [--limit=false]
//
// One process per rank (fork), one OpenBLAS thread each, synthetic data
// (a pool of batches cycled through, so "data" is only the batch switch:
// the worker's real data cost lives in the dataserver and prefetch
// threads). Each part is reported as the median over steps of wall time
// and of the trainer thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on a
// shared machine wall time includes time the thread was descheduled, CPU
// time does not. "proc_cpu" is the whole process's CPU time per step
// (trainer + communication thread), "comm" the communication thread's busy
// time per step (SyncStats). Samples/s is from wall time. With --world=1
// there is no communicator: the compute-only step.
//
// Also prints the compute limit: FLOP per sample from the layer shapes
// (forward 2*in*out per Linear, backward 2x that except the first layer's
// input gradient, which is never computed) over sgemm GFLOP/s measured at
// the step's own shapes in thread CPU time.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/comm/gloo/gloo_communicator.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"
#include "common/optim/sgd.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "gloo/rendezvous/file_store.h"

ABSL_FLAG(int, world, 2, "ranks (processes); 1 = compute only");
ABSL_FLAG(std::string, transport, "shm", "shm or gloo");
ABSL_FLAG(std::string, model, "mlp:784,1024,1024,10", "mlp spec");
ABSL_FLAG(int, batch, 64, "per-rank batch");
ABSL_FLAG(int, steps, 60, "timed steps (after 5 warm-up steps)");
ABSL_FLAG(double, bucket_cap_mb, 25, "AllreduceSync bucket cap (the worker's default)");
ABSL_FLAG(int, chunk_kb, 0, "ShmOptions::chunk_bytes of the gradient communicator in KiB (0: its default)");
ABSL_FLAG(bool, limit, true, "measure the compute limit first (off: only the steps, for profiling)");

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double ThreadCpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
double ProcCpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
double Wall() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

enum Part { kData, kForward, kBackward, kLoss, kWait, kOptimizer, kControl, kParts };
const char* const kPartNames[kParts] = {"data", "forward", "backward", "loss_read",
                                        "allreduce_wait", "optimizer", "ctl_allreduce"};

struct Timer {
  double w, c;
  void Start() { w = Wall(), c = ThreadCpu(); }
  void Stop(std::vector<double>* wall, std::vector<double>* cpu) {
    const double w1 = Wall(), c1 = ThreadCpu();
    wall->push_back((w1 - w) * 1e3);
    cpu->push_back((c1 - c) * 1e3);
    w = w1, c = c1;
  }
};

// sgemm GFLOP/s of the step's GEMMs, in thread CPU time, and FLOP/sample.
void ComputeLimit(kernels::CpuBackend& be, const std::vector<int>& widths, int batch) {
  using kernels::Transpose;
  struct G { Transpose ta, tb; int m, n, k; };
  std::vector<G> gemms;
  double flop_per_sample = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const int in = widths[i], out = widths[i + 1];
    gemms.push_back({Transpose::kNo, Transpose::kYes, batch, out, in});  // forward
    gemms.push_back({Transpose::kYes, Transpose::kNo, out, in, batch});  // dW
    flop_per_sample += 4.0 * in * out;
    if (i > 0) {
      gemms.push_back({Transpose::kNo, Transpose::kNo, batch, in, out});  // dx
      flop_per_sample += 2.0 * in * out;
    }
  }
  double total_flop = 0, total_sec = 0;
  for (const G& g : gemms) {
    const int lda = g.ta == Transpose::kNo ? g.k : g.m;
    const int ldb = g.tb == Transpose::kNo ? g.n : g.k;
    std::vector<float> a(static_cast<size_t>(g.m) * g.k, 0.5f), b(static_cast<size_t>(g.k) * g.n, 0.25f),
        c(static_cast<size_t>(g.m) * g.n);
    const double flop = 2.0 * g.m * g.n * g.k;
    const int iters = std::max(3, static_cast<int>(3e8 / flop));
    std::vector<double> secs;
    for (int r = 0; r < 7; ++r) {
      const double t0 = ThreadCpu();
      for (int i = 0; i < iters; ++i) {
        be.Gemm(g.ta, g.tb, g.m, g.n, g.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), g.n);
      }
      secs.push_back((ThreadCpu() - t0) / iters);
    }
    const double s = Median(secs);
    std::printf("  sgemm %c%c m=%-5d n=%-5d k=%-5d %6.1f GFLOP/s (thread CPU time)\n",
                g.ta == Transpose::kYes ? 'T' : 'N', g.tb == Transpose::kYes ? 'T' : 'N', g.m,
                g.n, g.k, flop / s / 1e9);
    total_flop += flop;
    total_sec += s;
  }
  const double gflops = total_flop / total_sec / 1e9;
  std::printf("compute limit: %.3f MFLOP/sample; the step's GEMMs run at %.1f GFLOP/s per core "
              "=> %.0f samples/s per core, %.0f for %ld cores; GEMM-only step %.2f ms\n",
              flop_per_sample / 1e6, gflops, gflops * 1e9 / flop_per_sample,
              gflops * 1e9 / flop_per_sample * sysconf(_SC_NPROCESSORS_ONLN),
              sysconf(_SC_NPROCESSORS_ONLN), total_sec * 1e3);
}

int RunRank(int rank, int world, const std::string& dir) {
  kernels::CpuBackend backend;
  const int batch = absl::GetFlag(FLAGS_batch);
  nn::ModelOptions mo;
  mo.max_batch = batch;
  auto model = nn::CreateModel(absl::GetFlag(FLAGS_model), &backend, mo);
  if (!model.ok() || (*model)->spec().kind != nn::ModelSpec::Kind::kMlp) {
    std::fprintf(stderr, "--model: %s\n",
                 model.ok() ? "need an mlp: spec" : model.status().ToString().c_str());
    return 1;
  }
  nn::Model& m = **model;
  const std::vector<int>& widths = m.spec().mlp.widths;
  if (rank == 0 && absl::GetFlag(FLAGS_limit)) ComputeLimit(backend, widths, batch);

  std::unique_ptr<Communicator> grad_comm, ctl_comm;
  std::unique_ptr<gloo::rendezvous::FileStore> store;
  if (world > 1) {
    store = std::make_unique<gloo::rendezvous::FileStore>(dir);
    const std::string transport = absl::GetFlag(FLAGS_transport);
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<std::unique_ptr<Communicator>> c;
      if (transport == "shm") {
        ShmOptions so;
        so.rank = rank;
        so.world_size = world;
        so.store = store.get();
        so.prefix = i == 0 ? "bench/grad" : "bench/ctl";
        if (i == 0 && absl::GetFlag(FLAGS_chunk_kb) > 0) {
          so.chunk_bytes = int64_t{absl::GetFlag(FLAGS_chunk_kb)} << 10;
        }
        if (i == 1) so.chunk_bytes = int64_t{256} << 10;
        auto s = ShmCommunicator::Create(so);
        if (s.ok()) c = std::unique_ptr<Communicator>(std::move(*s)); else c = s.status();
      } else {
        GlooOptions go;
        go.rank = rank;
        go.world_size = world;
        go.store = store.get();
        go.prefix = i == 0 ? "grad" : "ctl";
        auto g = GlooCommunicator::Create(go);
        if (g.ok()) c = std::unique_ptr<Communicator>(std::move(*g)); else c = g.status();
      }
      if (!c.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, c.status().ToString().c_str());
        return 1;
      }
      (i == 0 ? grad_comm : ctl_comm) = std::move(*c);
    }
  }

  sync::AllreduceSyncOptions o;
  std::unique_ptr<sync::GradientSync> sync;
  std::unique_ptr<optim::Optimizer> local_opt;
  optim::SgdOptions so;
  so.momentum = 0.9f;
  if (world > 1) {
    o.comm = grad_comm.get();
    o.params = m.storage().params();
    o.grads = m.storage().grads();
    o.size = m.storage().size();
    for (const nn::GradRange& r : nn::GroupRanges(m.layout())) o.ready_ranges.push_back({r.lo, r.hi});
    o.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
    o.optimizer = *optim::Sgd::Create({0, o.size}, so);
    auto created = sync::CreateAllreduceSync(std::move(o));
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      return 1;
    }
    sync = std::move(*created);
  } else {
    local_opt = *optim::Sgd::Create({0, m.storage().size()}, so);
  }

  const int in = widths.front(), classes = widths.back();
  constexpr int kPool = 8;
  std::mt19937 rng(rank + 1);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> xs(kPool, std::vector<float>(static_cast<size_t>(batch) * in));
  std::vector<std::vector<int32_t>> ys(kPool, std::vector<int32_t>(batch));
  for (int p = 0; p < kPool; ++p) {
    for (float& v : xs[p]) v = normal(rng);
    for (int32_t& v : ys[p]) v = static_cast<int32_t>(rng() % classes);
  }

  const int steps = absl::GetFlag(FLAGS_steps);
  std::vector<double> wall[kParts], cpu[kParts], step_wall, proc_cpu;
  sync::SyncStats before;
  double loss_sum = 0;
  for (int step = 1; step <= 5 + steps; ++step) {
    if (step == 6) {
      if (sync) before = sync->stats();
      for (int p = 0; p < kParts; ++p) wall[p].clear(), cpu[p].clear();
    }
    const double w0 = Wall(), p0 = ProcCpu();
    Timer t;
    t.Start();
    nn::Batch b;
    b.size = batch;
    b.features = xs[step % kPool].data();
    b.labels = ys[step % kPool].data();
    t.Stop(&wall[kData], &cpu[kData]);
    absl::Status st = m.Forward(b);
    t.Stop(&wall[kForward], &cpu[kForward]);
    if (st.ok() && sync) st = sync->BeginStep({});
    if (st.ok()) {
      if (sync) {
        sync::GradientSync* s = sync.get();
        st = m.Backward(0.f, [s](const nn::GradRange& r) { s->OnGradientsReady(r.lo, r.hi); });
      } else {
        st = m.Backward(0.f, nullptr);
      }
    }
    t.Stop(&wall[kBackward], &cpu[kBackward]);
    float loss = 0;
    if (st.ok()) st = backend.CopyToHost(&loss, m.loss(), sizeof(float));
    loss_sum += loss;
    t.Stop(&wall[kLoss], &cpu[kLoss]);
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = 0.01f;
    if (st.ok()) {
      if (sync) {
        const double exposed0 = sync->stats().exposed_wait_seconds;
        st = sync->FinishStep(ctx);
        const double w1 = Wall(), c1 = ThreadCpu();
        const double exposed = (sync->stats().exposed_wait_seconds - exposed0) * 1e3;
        const double total_w = (w1 - t.w) * 1e3, total_c = (c1 - t.c) * 1e3;
        // The exposed wait is wall time; its CPU share is unknown (spin vs
        // sleep), so the split of CPU time charges all but the wait's wall
        // time (at most) to the optimizer.
        wall[kWait].push_back(exposed);
        wall[kOptimizer].push_back(total_w - exposed);
        cpu[kOptimizer].push_back(std::min(total_c, total_w - exposed));
        cpu[kWait].push_back(total_c - cpu[kOptimizer].back());
        t.w = w1, t.c = c1;
      } else {
        st = local_opt->Step(m.storage().params(), m.storage().grads(), m.storage().size(), ctx);
        wall[kWait].push_back(0), cpu[kWait].push_back(0);
        t.Stop(&wall[kOptimizer], &cpu[kOptimizer]);
      }
    }
    if (st.ok() && ctl_comm) {
      float flags[3] = {0, 0, 0};
      st = ctl_comm->AllReduce(flags, 3, ReduceOp::kMax);
    }
    t.Stop(&wall[kControl], &cpu[kControl]);
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d step %d: %s\n", rank, step, st.ToString().c_str());
      return 1;
    }
    if (step > 5) {
      step_wall.push_back((Wall() - w0) * 1e3);
      proc_cpu.push_back((ProcCpu() - p0) * 1e3);
    }
  }
  const double comm_ms =
      sync ? (sync->stats().comm_seconds - before.comm_seconds) / steps * 1e3 : 0.0;
  if (rank == 0) {
    std::printf("breakdown rank 0 of %d (%s), %s batch %d, median of %d steps, ms/step:\n", world,
                world > 1 ? absl::GetFlag(FLAGS_transport).c_str() : "no comm",
                absl::GetFlag(FLAGS_model).c_str(), batch, steps);
    std::printf("  %-15s %8s %8s\n", "part", "wall", "cpu");
    double sw = 0, sc = 0;
    for (int p = 0; p < kParts; ++p) {
      const double mw = Median(wall[p]), mc = Median(cpu[p]);
      sw += mw, sc += mc;
      std::printf("  %-15s %8.3f %8.3f\n", kPartNames[p], mw, mc);
    }
    std::printf("  %-15s %8.3f %8.3f   (sum of medians)\n", "total", sw, sc);
    const double step_ms = Median(step_wall);
    std::printf("  step wall %.3f ms => %.0f samples/s for %d rank(s); proc_cpu %.3f ms/step; "
                "comm thread busy %.3f ms/step; trainer cpu/wall %.0f%%\n",
                step_ms, world * batch / step_ms * 1e3, world, Median(proc_cpu), comm_ms,
                100.0 * sc / sw);
    std::printf("RESULT breakdown world=%d forward=%.3f backward=%.3f wait=%.3f optimizer=%.3f "
                "ctl=%.3f step_wall=%.3f cpu_step=%.3f samples_per_s=%.0f\n",
                world, Median(cpu[kForward]), Median(cpu[kBackward]), Median(wall[kWait]),
                Median(cpu[kOptimizer]), Median(wall[kControl]), step_ms, Median(proc_cpu),
                world * batch / step_ms * 1e3);
    std::fflush(stdout);
  }
  if (loss_sum != loss_sum) std::fprintf(stderr, "rank %d: NaN loss\n", rank);
  return 0;
}

int Main() {
  const int world = absl::GetFlag(FLAGS_world);
  const std::string transport = absl::GetFlag(FLAGS_transport);
  if (world < 1 || (transport != "shm" && transport != "gloo")) {
    std::fprintf(stderr, "--world must be >= 1 and --transport shm or gloo\n");
    return 2;
  }
  char tmpl[] = "/tmp/tandem_breakdown_bench_XXXXXX";
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
      const int code = RunRank(r, world, dir);
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
