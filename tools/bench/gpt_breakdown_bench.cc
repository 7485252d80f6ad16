// Where a GPT training step goes, kernel by kernel: every Backend call one
// CPU worker's GptModel makes in a forward + backward (embedding, LayerNorm,
// the QKV / projection / MLP / head GEMMs, attention, GELU, cross-entropy,
// residual adds and each backward), timed on its own at the model's shapes
// and printed with its achieved GFLOP/s (GEMM-like kernels) or GB/s (the
// memory-bound rest) against this machine's calibrated rates, measured in
// the same run the way `tandem plan --calibrate` measures them
// (common/plan/calibrate: the default MLP's forward + backward for the GEMM
// rate, a memcpy for streaming bandwidth).
//
//   bazel build -c opt //tools/bench:gpt_breakdown_bench
//   tandem exec -- bazel-bin/tools/bench/gpt_breakdown_bench
//       [--model=gpt:layers=4,width=256,heads=4,context=128] [--batch=8] [--reps=15]
//       [--step_only] [--vector_width=avx512] [--kernels=attn,gelu]
//
// (`tandem exec` gives OpenBLAS the kernel set tandem's workers get.) One
// thread. Times are the median over --reps of thread CPU time (on a shared
// machine wall time includes time the thread was descheduled). Each kernel
// runs on buffers of the model's own sizes holding random values; the
// "count" column is how often a step runs it, "ms/step" is count x median.
// The last lines compare the sum with the measured GptModel step
// (Forward + Backward) and give the model's training FLOP rate as a share of
// the calibrated GEMM rate. --step_only prints just the step time (for
// comparing two builds side by side).
#include <time.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "common/kernels/blas_core.h"
#include "common/kernels/cpu_backend.h"
#include "common/numeric/cpu_dispatch.h"
#include "common/nn/model.h"
#include "common/plan/calibrate.h"
#include "common/plan/model_cost.h"
#include "tools/bench/gpt_step_kernels.h"

ABSL_FLAG(std::string, model, "gpt:layers=4,width=256,heads=4,context=128", "gpt spec");
ABSL_FLAG(int, batch, 8, "sequences per step");
ABSL_FLAG(int, reps, 15, "timed repetitions per kernel (median)");
ABSL_FLAG(bool, step_only, false, "only the whole step's time (forward + backward)");
ABSL_FLAG(std::string, kernels, "",
          "time only the kernels whose name contains one of these comma-separated words");
ABSL_FLAG(std::string, vector_width, "",
          "cap the dispatched loops' width: sse4.2, avx2 or avx512 (default: the library's)");

namespace tandem {
namespace {

double ThreadCpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of one call of `f`, each sample averaging enough calls to
// last about a millisecond.
double TimeIt(const std::function<void()>& f, int reps) {
  f();  // warm caches and BLAS buffers
  const double t0 = ThreadCpu();
  f();
  const double once = std::max(1e-7, ThreadCpu() - t0);
  const int inner = std::max(1, static_cast<int>(1e-3 / once));
  std::vector<double> secs;
  for (int r = 0; r < reps; ++r) {
    const double s = ThreadCpu();
    for (int i = 0; i < inner; ++i) f();
    secs.push_back((ThreadCpu() - s) / inner);
  }
  return Median(secs);
}

// Median seconds of one Forward + Backward of the whole model (GPT or MLP).
absl::StatusOr<double> StepSeconds(const std::string& spec, int batch, int reps) {
  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = batch;
  absl::StatusOr<std::unique_ptr<nn::Model>> model = nn::CreateModel(spec, &backend, mo);
  if (!model.ok()) return model.status();
  nn::Model& m = **model;
  const bool gpt = m.spec().kind == nn::ModelSpec::Kind::kGpt;
  const int rows = gpt ? batch * m.spec().gpt.context : batch;
  const int classes = m.num_classes();
  std::mt19937 rng(1);
  std::vector<int32_t> tokens(rows), labels(rows);
  std::vector<float> features(gpt ? 0 : static_cast<size_t>(batch) * m.spec().mlp.widths.front());
  for (int i = 0; i < rows; ++i) {
    tokens[i] = static_cast<int32_t>(rng() % classes);
    labels[i] = static_cast<int32_t>(rng() % classes);
  }
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& f : features) f = u(rng);
  nn::Batch b;
  b.size = batch;
  if (gpt) b.tokens = tokens.data();
  b.labels = labels.data();
  b.features = gpt ? nullptr : features.data();
  absl::Status st;
  const double s = TimeIt(
      [&] {
        if (st.ok()) st = m.Forward(b);
        if (st.ok()) st = m.Backward(0.f, nullptr, 1.f);
      },
      reps);
  if (!st.ok()) return st;
  return s;
}

int Main() {
  const std::string spec_text = absl::GetFlag(FLAGS_model);
  const int batch = absl::GetFlag(FLAGS_batch), reps = std::max(1, absl::GetFlag(FLAGS_reps));
  absl::StatusOr<nn::ModelSpec> spec = nn::ParseModelSpec(spec_text);
  if (!spec.ok() || spec->kind != nn::ModelSpec::Kind::kGpt || batch < 1) {
    std::fprintf(stderr, "--model needs a gpt: spec and --batch >= 1 (%s)\n",
                 spec.ok() ? "not a gpt spec" : spec.status().ToString().c_str());
    return 2;
  }
  const std::string width = absl::GetFlag(FLAGS_vector_width);
  if (width == "sse4.2" || width == "avx2" || width == "avx512") {
    numeric::ForceVectorWidth(width == "avx512" ? numeric::VectorWidth::kAvx512
                              : width == "avx2" ? numeric::VectorWidth::kAvx2
                                                : numeric::VectorWidth::kSse42);
  } else if (!width.empty()) {
    std::fprintf(stderr, "--vector_width must be sse4.2, avx2 or avx512 (got '%s')\n",
                 width.c_str());
    return 2;
  }
  absl::StatusOr<double> step = StepSeconds(spec_text, batch, reps);
  if (!step.ok()) {
    std::fprintf(stderr, "%s\n", step.status().ToString().c_str());
    return 1;
  }
  const double tokens = static_cast<double>(batch) * spec->gpt.context;
  absl::StatusOr<plan::ModelCost> cost = plan::ModelCostOf(*spec);
  const double step_flop = cost.ok() ? cost->train_flops * batch : 0;
  if (absl::GetFlag(FLAGS_step_only)) {
    std::printf("RESULT step_ms=%.3f tokens_per_s=%.0f gflops=%.2f\n", *step * 1e3,
                tokens / *step, step_flop / *step / 1e9);
    return 0;
  }
  // calibrate.cc's two measurements (its MLP step, a 64 MiB memcpy), timed
  // here in thread CPU time like every kernel below, so the shares compare
  // like with like on a loaded machine; calibrate's own wall-clock numbers
  // are printed for reference.
  const std::string mlp = "mlp:784,1024,1024,10";
  absl::StatusOr<double> mlp_step = StepSeconds(mlp, 64, reps);
  absl::StatusOr<plan::ModelCost> mlp_cost = plan::ModelCostOf(*nn::ParseModelSpec(mlp));
  if (!mlp_step.ok() || !mlp_cost.ok()) {
    std::fprintf(stderr, "calibration failed\n");
    return 1;
  }
  const double gemm = mlp_cost->train_flops * 64 / *mlp_step;
  std::vector<char> src(size_t{64} << 20, 1), dst(src.size(), 2);
  const double stream =
      2.0 * src.size() / TimeIt([&] { std::memcpy(dst.data(), src.data(), src.size()); }, 5);
  absl::StatusOr<double> wall_gemm = plan::MeasureModelFlops(mlp, 64, 5);
  std::printf("%s batch %d (%.0f tokens), OpenBLAS core %s, vector width %s\n", spec_text.c_str(),
              batch, tokens, kernels::OpenblasCoreName().c_str(), numeric::VectorWidthName());
  std::printf("calibrated (thread CPU time): GEMM %.1f GFLOP/s (%s forward + backward, batch 64), "
              "stream %.1f GB/s (memcpy read + write); calibrate's wall-clock GEMM rate now %.1f\n",
              gemm / 1e9, mlp.c_str(), stream / 1e9, wall_gemm.ok() ? *wall_gemm / 1e9 : 0.0);
  kernels::CpuBackend backend;
  absl::StatusOr<std::vector<bench::StepKernel>> list =
      bench::GptStepKernels(spec->gpt, batch, &backend);
  if (!list.ok()) {
    std::fprintf(stderr, "%s\n", list.status().ToString().c_str());
    return 1;
  }
  std::printf("%-28s %5s %9s %9s %9s %7s %9s %7s\n", "kernel", "count", "us/call", "ms/step",
              "GFLOP/s", "%gemm", "GB/s", "%strm");
  const std::vector<std::string> only =
      absl::StrSplit(absl::GetFlag(FLAGS_kernels), ',', absl::SkipEmpty());
  double sum = 0;
  for (const bench::StepKernel& k : *list) {
    const bool wanted = only.empty() || std::any_of(only.begin(), only.end(), [&](const std::string& w) {
                          return k.name.find(w) != std::string::npos;
                        });
    if (!wanted) continue;
    const double s = TimeIt(k.run, reps);
    sum += s * k.count;
    const double gf = k.flop / s / 1e9, gb = k.bytes / s / 1e9;
    std::printf("%-28s %5d %9.1f %9.3f %9s %7s %9.2f %6.0f%%\n", k.name.c_str(), k.count, s * 1e6,
                s * k.count * 1e3, k.flop > 0 ? std::to_string(gf).substr(0, 6).c_str() : "-",
                k.flop > 0 ? (std::to_string(static_cast<int>(100 * gf * 1e9 / gemm)) + "%").c_str()
                           : "-",
                gb, 100 * gb * 1e9 / stream);
  }
  std::printf("sum of %s kernels %.2f ms; measured step (GptModel Forward + Backward) %.2f ms => "
              "%.0f tokens/s\n",
              only.empty() ? "all" : "the chosen", sum * 1e3, *step * 1e3, tokens / *step);
  std::printf("model training FLOP (plan's cost model) %.2f GFLOP/step => %.1f GFLOP/s = %.0f%% of "
              "the calibrated GEMM rate\n",
              step_flop / 1e9, step_flop / *step / 1e9, 100 * step_flop / *step / gemm);
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
