// Linear's two weight GEMMs at a small batch, OpenBLAS against the kernels
// that read the weight in place (common/kernels/cpu_small_m_gemm.h), call by
// call in one process: CpuBackend::Gemm at the baseline vector width (which
// runs OpenBLAS) alternating with the default width (the kernels where they
// apply). Several weights in rotation, so each call reads its weight from
// memory as in a training step. Thread CPU time, medians.
//
//   bazel run -c opt //tools/bench:mlp_gemm_bench -- --rows=64 --in=1024 --out=1024
//
// Prints `RESULT gemm openblas_fwd_ms=... kernel_fwd_ms=... openblas_dx_ms=...
// kernel_dx_ms=...` (tools/bench/ab_interleave.py reads it).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/kernels/cpu_backend.h"
#include "common/numeric/cpu_dispatch.h"

ABSL_FLAG(int, rows, 64, "batch rows M");
ABSL_FLAG(int, in, 1024, "input width K (the weight is [out, in])");
ABSL_FLAG(int, out, 1024, "output width N");
ABSL_FLAG(int, calls, 200, "timed calls per variant");
ABSL_FLAG(int, weights, 4, "weights in rotation (4 x 4 MB outgrows L2)");

namespace {

using tandem::kernels::CpuBackend;
using tandem::kernels::Transpose;

double ThreadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2] * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int m = absl::GetFlag(FLAGS_rows), k = absl::GetFlag(FLAGS_in);
  const int n = absl::GetFlag(FLAGS_out), calls = absl::GetFlag(FLAGS_calls);
  const int nw = std::max(1, absl::GetFlag(FLAGS_weights));
  if (m <= 0 || k <= 0 || n <= 0 || calls <= 0) {
    std::fprintf(stderr, "mlp_gemm_bench: --rows, --in, --out and --calls must be positive\n");
    return 1;
  }
  CpuBackend be;
  std::vector<float> x(static_cast<size_t>(m) * k, 0.25f), dy(static_cast<size_t>(m) * n, 0.5f);
  std::vector<float> y(static_cast<size_t>(m) * n), dx(static_cast<size_t>(m) * k);
  std::vector<std::vector<float>> w(nw, std::vector<float>(static_cast<size_t>(n) * k, 0.125f));
  // [variant][call]: 0/1 forward OpenBLAS / default, 2/3 dx.
  std::vector<std::vector<double>> t(4);
  for (int c = 0; c < calls + 5; ++c) {
    const float* wc = w[c % nw].data();
    for (int v = 0; v < 2; ++v) {
      tandem::numeric::ForceBaselineVectorWidth(v == 0);
      const double t0 = ThreadSeconds();
      be.Gemm(Transpose::kNo, Transpose::kYes, m, n, k, 1.f, x.data(), k, wc, k, 0.f, y.data(), n);
      const double t1 = ThreadSeconds();
      be.Gemm(Transpose::kNo, Transpose::kNo, m, k, n, 1.f, dy.data(), n, wc, k, 0.f, dx.data(), k);
      const double t2 = ThreadSeconds();
      if (c < 5) continue;  // warm-up: scratch growth, first touches
      t[v].push_back(t1 - t0);
      t[2 + v].push_back(t2 - t1);
    }
  }
  tandem::numeric::ForceBaselineVectorWidth(false);
  const double flop = 2.0 * m * n * k;
  const double f[4] = {MedianMs(t[0]), MedianMs(t[1]), MedianMs(t[2]), MedianMs(t[3])};
  std::printf("%d x %d x %d (M x N x K), kernels at %s, %d calls, thread CPU medians\n", m, n, k,
              tandem::numeric::VectorWidthName(tandem::numeric::CpuVectorWidth()), calls);
  std::printf("  forward Y = X W^T:  OpenBLAS %.3f ms (%.0f GFLOP/s)  default %.3f ms (%.0f)\n", f[0],
              flop / f[0] * 1e-6, f[1], flop / f[1] * 1e-6);
  std::printf("  dx      dX = dY W:  OpenBLAS %.3f ms (%.0f GFLOP/s)  default %.3f ms (%.0f)\n", f[2],
              flop / f[2] * 1e-6, f[3], flop / f[3] * 1e-6);
  std::printf(
      "RESULT gemm openblas_fwd_ms=%.4f kernel_fwd_ms=%.4f openblas_dx_ms=%.4f kernel_dx_ms=%.4f\n",
      f[0], f[1], f[2], f[3]);
  return 0;
}
