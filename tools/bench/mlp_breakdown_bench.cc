// Where one worker's training step goes: the CPU MLP step of `tandem local`
// (AllreduceSync with SGD momentum over a ShmCommunicator or Gloo, a 3-float
// control allreduce per step, the loss read back per micro-step), split
// into data / forward / backward / allreduce wait / optimizer / control.
//
//   bazel build //tools/bench:mlp_breakdown_bench
//   mlp_breakdown_bench [--world=2] [--transport=shm|gloo] [--model=mlp:784,1024,1024,10]
//                       [--batch=64] [--steps=60] [--bucket_cap_mb=25] [--chunk_kb=4096]
//                       [--limit=false] [--step_per_bucket=false]
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
ABSL_FLAG(bool, step_per_bucket, true,
          "AllreduceSync steps each bucket right after its allreduce (the step's context is "
          "given at BeginStep, as the worker does); false: the whole vector in FinishStep");
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

// Communicator i (0: gradients, 1: the control mesh) of `rank`.
absl::StatusOr<std::unique_ptr<Communicator>> MakeComm(int rank, int world,
                                                       gloo::rendezvous::Store* store, int i) {
  if (absl::GetFlag(FLAGS_transport) == "shm") {
    ShmOptions so;
    so.rank = rank;
    so.world_size = world;
    so.store = store;
    so.prefix = i == 0 ? "bench/grad" : "bench/ctl";
    if (i == 0 && absl::GetFlag(FLAGS_chunk_kb) > 0) {
      so.chunk_bytes = int64_t{absl::GetFlag(FLAGS_chunk_kb)} << 10;
    }
    if (i == 1) so.chunk_bytes = int64_t{256} << 10;
    auto s = ShmCommunicator::Create(so);
    if (!s.ok()) return s.status();
    return std::unique_ptr<Communicator>(std::move(*s));
  }
  GlooOptions go;
  go.rank = rank;
  go.world_size = world;
  go.store = store;
  go.prefix = i == 0 ? "grad" : "ctl";
  auto g = GlooCommunicator::Create(go);
  if (!g.ok()) return g.status();
  return std::unique_ptr<Communicator>(std::move(*g));
}

// AllreduceSync with SGD momentum over `comm`, as the worker builds it.
absl::StatusOr<std::unique_ptr<sync::GradientSync>> MakeSync(nn::Model& m, Communicator* comm,
                                                             const optim::SgdOptions& so) {
  sync::AllreduceSyncOptions o;
  o.comm = comm;
  o.params = m.storage().params();
  o.grads = m.storage().grads();
  o.size = m.storage().size();
  for (const nn::GradRange& r : nn::GroupRanges(m.layout())) o.ready_ranges.push_back({r.lo, r.hi});
  o.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  o.step_per_bucket = absl::GetFlag(FLAGS_step_per_bucket);
  o.optimizer = *optim::Sgd::Create({0, o.size}, so);
  return sync::CreateAllreduceSync(std::move(o));
}

// A pool of synthetic batches cycled through.
struct Pool {
  static constexpr int kSize = 8;
  std::vector<std::vector<float>> xs;
  std::vector<std::vector<int32_t>> ys;

  Pool(int rank, int batch, int in, int classes)
      : xs(kSize, std::vector<float>(static_cast<size_t>(batch) * in)),
        ys(kSize, std::vector<int32_t>(batch)) {
    std::mt19937 rng(rank + 1);
    std::normal_distribution<float> normal;
    for (int p = 0; p < kSize; ++p) {
      for (float& v : xs[p]) v = normal(rng);
      for (int32_t& v : ys[p]) v = static_cast<int32_t>(rng() % classes);
    }
  }
};

// Per-part times of every step (ms).
struct Samples {
  std::vector<double> wall[kParts], cpu[kParts], step_wall, proc_cpu;
};

// What one rank trains with: the model, its backend, the sync (world > 1)
// or a local optimizer, the control mesh (world > 1).
struct Rank {
  kernels::CpuBackend* backend;
  nn::Model* model;
  sync::GradientSync* sync;       // null: one rank
  optim::Optimizer* local_opt;    // one rank
  Communicator* ctl;              // null: one rank
};

// FinishStep, or the local optimizer step, timed into kWait / kOptimizer.
absl::Status TimedFinish(const Rank& r, const optim::StepContext& ctx, Timer& t, Samples& s) {
  if (r.sync == nullptr) {
    nn::Model& m = *r.model;
    absl::Status st =
        r.local_opt->Step(m.storage().params(), m.storage().grads(), m.storage().size(), ctx);
    s.wall[kWait].push_back(0), s.cpu[kWait].push_back(0);
    t.Stop(&s.wall[kOptimizer], &s.cpu[kOptimizer]);
    return st;
  }
  const double exposed0 = r.sync->stats().exposed_wait_seconds;
  absl::Status st = r.sync->FinishStep(ctx);
  const double w1 = Wall(), c1 = ThreadCpu();
  const double exposed = (r.sync->stats().exposed_wait_seconds - exposed0) * 1e3;
  const double total_w = (w1 - t.w) * 1e3, total_c = (c1 - t.c) * 1e3;
  // The exposed wait is wall time; its CPU share is unknown (spin vs
  // sleep), so the split of CPU time charges all but the wait's wall
  // time (at most) to the optimizer.
  s.wall[kWait].push_back(exposed);
  s.wall[kOptimizer].push_back(total_w - exposed);
  s.cpu[kOptimizer].push_back(std::min(total_c, total_w - exposed));
  s.cpu[kWait].push_back(total_c - s.cpu[kOptimizer].back());
  t.w = w1, t.c = c1;
  return st;
}

// One training step with every part timed into `s`; the loss added to *loss_sum.
absl::Status TimedStep(const Rank& r, const Pool& pool, int batch, int step, Samples& s,
                       double* loss_sum) {
  nn::Model& m = *r.model;
  Timer t;
  t.Start();
  nn::Batch b;
  b.size = batch;
  b.features = pool.xs[step % Pool::kSize].data();
  b.labels = pool.ys[step % Pool::kSize].data();
  t.Stop(&s.wall[kData], &s.cpu[kData]);
  absl::Status st = m.Forward(b);
  t.Stop(&s.wall[kForward], &s.cpu[kForward]);
  optim::StepContext ctx;
  ctx.step = step;
  ctx.lr = 0.01f;
  sync::StepOptions so;
  so.context = ctx;  // as the worker's StepRunner
  if (st.ok() && r.sync != nullptr) st = r.sync->BeginStep(so);
  if (st.ok()) {
    sync::GradientSync* sy = r.sync;
    st = sy != nullptr
             ? m.Backward(0.f, [sy](const nn::GradRange& g) { sy->OnGradientsReady(g.lo, g.hi); })
             : m.Backward(0.f, nullptr);
  }
  t.Stop(&s.wall[kBackward], &s.cpu[kBackward]);
  float loss = 0;
  if (st.ok()) st = r.backend->CopyToHost(&loss, m.loss(), sizeof(float));
  *loss_sum += loss;
  t.Stop(&s.wall[kLoss], &s.cpu[kLoss]);
  if (st.ok()) st = TimedFinish(r, ctx, t, s);
  if (st.ok() && r.ctl != nullptr) {
    float flags[3] = {0, 0, 0};
    st = r.ctl->AllReduce(flags, 3, ReduceOp::kMax);
  }
  t.Stop(&s.wall[kControl], &s.cpu[kControl]);
  return st;
}

// Rank 0's table and its RESULT line.
void Report(const Samples& s, int world, int batch, int steps, double comm_ms) {
  std::printf("breakdown rank 0 of %d (%s), %s batch %d, median of %d steps, ms/step:\n", world,
              world > 1 ? absl::GetFlag(FLAGS_transport).c_str() : "no comm",
              absl::GetFlag(FLAGS_model).c_str(), batch, steps);
  std::printf("  %-15s %8s %8s\n", "part", "wall", "cpu");
  double sw = 0, sc = 0;
  for (int p = 0; p < kParts; ++p) {
    const double mw = Median(s.wall[p]), mc = Median(s.cpu[p]);
    sw += mw, sc += mc;
    std::printf("  %-15s %8.3f %8.3f\n", kPartNames[p], mw, mc);
  }
  std::printf("  %-15s %8.3f %8.3f   (sum of medians)\n", "total", sw, sc);
  const double step_ms = Median(s.step_wall);
  std::printf("  step wall %.3f ms => %.0f samples/s for %d rank(s); proc_cpu %.3f ms/step; "
              "comm thread busy %.3f ms/step; trainer cpu/wall %.0f%%\n",
              step_ms, world * batch / step_ms * 1e3, world, Median(s.proc_cpu), comm_ms,
              100.0 * sc / sw);
  std::printf("RESULT breakdown world=%d forward=%.3f backward=%.3f wait=%.3f optimizer=%.3f "
              "ctl=%.3f step_wall=%.3f cpu_step=%.3f samples_per_s=%.0f\n",
              world, Median(s.cpu[kForward]), Median(s.cpu[kBackward]), Median(s.wall[kWait]),
              Median(s.cpu[kOptimizer]), Median(s.wall[kControl]), step_ms, Median(s.proc_cpu),
              world * batch / step_ms * 1e3);
  std::fflush(stdout);
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

  std::unique_ptr<Communicator> comms[2];  // gradients, control
  std::unique_ptr<gloo::rendezvous::FileStore> store;
  std::unique_ptr<sync::GradientSync> sync;
  std::unique_ptr<optim::Optimizer> local_opt;
  optim::SgdOptions so;
  so.momentum = 0.9f;
  if (world > 1) {
    store = std::make_unique<gloo::rendezvous::FileStore>(dir);
    for (int i = 0; i < 2; ++i) {
      auto c = MakeComm(rank, world, store.get(), i);
      if (!c.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, c.status().ToString().c_str());
        return 1;
      }
      comms[i] = std::move(*c);
    }
    auto created = MakeSync(m, comms[0].get(), so);
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      return 1;
    }
    sync = std::move(*created);
  } else {
    local_opt = *optim::Sgd::Create({0, m.storage().size()}, so);
  }
  const Pool pool(rank, batch, widths.front(), widths.back());
  const Rank r{&backend, &m, sync.get(), local_opt.get(), comms[1].get()};

  const int steps = absl::GetFlag(FLAGS_steps);
  Samples s;
  sync::SyncStats before;
  double loss_sum = 0;
  for (int step = 1; step <= 5 + steps; ++step) {
    if (step == 6) {  // after 5 warm-up steps
      if (sync) before = sync->stats();
      for (int p = 0; p < kParts; ++p) s.wall[p].clear(), s.cpu[p].clear();
    }
    const double w0 = Wall(), p0 = ProcCpu();
    if (absl::Status st = TimedStep(r, pool, batch, step, s, &loss_sum); !st.ok()) {
      std::fprintf(stderr, "rank %d step %d: %s\n", rank, step, st.ToString().c_str());
      return 1;
    }
    if (step > 5) {
      s.step_wall.push_back((Wall() - w0) * 1e3);
      s.proc_cpu.push_back((ProcCpu() - p0) * 1e3);
    }
  }
  const double comm_ms =
      sync ? (sync->stats().comm_seconds - before.comm_seconds) / steps * 1e3 : 0.0;
  if (rank == 0) Report(s, world, batch, steps, comm_ms);
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
