// optim_bench: single-thread throughput of the optimizer updates (and the
// other element-wise passes of a mixed-precision step) in GB/s of memory
// traffic, next to a memcpy measured in the same run on the same buffers.
//
//   bazel run -c opt //tools/bench:optim_bench -- --n=16777216 --reps=9
//
// Traffic counts the bytes each pass must move once (AdamW: read p, g, m, v
// and write p, m, v = 28 B/element; SGD+momentum: 20; plain SGD: 12;
// memcpy: 8). Stores that allocate a cache line also read it first (RFO),
// while in-place updates (p, m, v) read and write the same lines, so they can
// exceed memcpy's counted GB/s; the "scale_in_place" row (read and write one
// array in place, STREAM-style) is the like-for-like ceiling, and both
// ratios are printed. Prints the median of --reps runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/numeric/cpu_dispatch.h"
#include "common/numeric/precision.h"
#include "common/optim/adamw.h"
#include "common/optim/clip.h"
#include "common/optim/sgd.h"

namespace {

using Clock = std::chrono::steady_clock;

double MedianSeconds(int reps, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, caches
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int64_t FlagValue(int argc, char** argv, const char* name, int64_t def) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::strtoll(argv[i] + prefix.size(), nullptr, 10);
    }
  }
  return def;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "optim_bench: %s\n", what.c_str());
  std::exit(1);
}

// One pass: its name, bytes moved per element, median seconds.
struct Row {
  const char* name;
  double bytes_per_element;
  double seconds;
};

// The table, each pass in GB/s against memcpy (rows[0]) and the in-place
// scale (rows[1]).
void PrintRows(const std::vector<Row>& rows, int64_t n, int reps) {
  const double memcpy_gbs = 8.0 * n / rows[0].seconds / 1e9;
  const double inplace_gbs = 8.0 * n / rows[1].seconds / 1e9;
  std::printf("optim_bench: n = %lld floats (%.0f MiB per buffer), one thread, "
              "median of %d\n",
              static_cast<long long>(n), n * 4.0 / (1 << 20), reps);
  std::printf("%-20s %8s %9s %9s %10s %10s\n", "pass", "B/elem", "ms", "GB/s",
              "vs memcpy", "vs inplace");
  for (const Row& r : rows) {
    const double gbs = r.bytes_per_element * n / r.seconds / 1e9;
    std::printf("%-20s %8.0f %9.2f %9.2f %10.2f %10.2f\n", r.name,
                r.bytes_per_element, r.seconds * 1e3, gbs, gbs / memcpy_gbs,
                gbs / inplace_gbs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tandem::optim;
  const int64_t n = FlagValue(argc, argv, "n", 16 << 20);
  const int reps = static_cast<int>(FlagValue(argc, argv, "reps", 9));
  if (n <= 0 || reps <= 0) Die("--n and --reps must be positive");

  std::vector<float> params(n), grads(n), copy(n);
  std::vector<uint16_t> half(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    params[i] = dist(rng);
    grads[i] = dist(rng) * 1e-3f;
  }

  auto adamw = AdamW::Create({0, n}, AdamWOptions());
  SgdOptions mo;
  mo.momentum = 0.9f;
  auto sgd_m = Sgd::Create({0, n}, mo);
  auto sgd = Sgd::Create({0, n}, SgdOptions());
  if (!adamw.ok() || !sgd_m.ok() || !sgd.ok()) Die("cannot create optimizers");

  StepContext ctx;
  ctx.lr = 1e-6f;
  int64_t step = 0;
  auto step_with = [&](Optimizer* opt) {
    ctx.step = ++step;
    const auto s = opt->Step(params.data(), grads.data(), n, ctx);
    if (!s.ok()) Die(std::string(s.message()));
  };

  std::vector<Row> rows;
  volatile double sink = 0;
  rows.push_back({"memcpy", 8, MedianSeconds(reps, [&] {
                    std::memcpy(copy.data(), params.data(), n * sizeof(float));
                  })});
  // In-place read-modify-write (STREAM "scale" on one array): the same
  // access pattern as the optimizers, so a second, fairer reference.
  rows.push_back({"scale_in_place", 8, MedianSeconds(reps, [&] {
                    ScaleInPlace(absl::MakeSpan(copy), 1.0000001f);
                  })});
  // The optimizers' loops are dispatched by vector width (cpu_dispatch.h):
  // one row per width this CPU runs, side by side.
  std::vector<std::string> names;
  names.reserve(16);
  for (tandem::numeric::VectorWidth w : tandem::numeric::SupportedVectorWidths()) {
    tandem::numeric::ForceVectorWidth(w);
    const std::string at = std::string("@") + tandem::numeric::VectorWidthName(w);
    names.push_back("adamw" + at);
    rows.push_back({names.back().c_str(), 28, MedianSeconds(reps, [&] { step_with(adamw->get()); })});
    names.push_back("sgd_momentum" + at);
    rows.push_back({names.back().c_str(), 20, MedianSeconds(reps, [&] { step_with(sgd_m->get()); })});
    names.push_back("sgd" + at);
    rows.push_back({names.back().c_str(), 12, MedianSeconds(reps, [&] { step_with(sgd->get()); })});
  }
  tandem::numeric::ForceBaselineVectorWidth(false);  // back to the default
  rows.push_back({"sum_of_squares", 4, MedianSeconds(reps, [&] {
                    sink = sink + PartialSumOfSquares(grads);
                  })});
  rows.push_back({"has_non_finite", 4, MedianSeconds(reps, [&] {
                    sink = sink + tandem::numeric::HasNonFinite(grads);
                  })});
  rows.push_back({"fp32_to_bf16", 6, MedianSeconds(reps, [&] {
                    (void)tandem::numeric::FloatToBf16(params, absl::MakeSpan(half));
                  })});
  rows.push_back({"fp32_to_fp16", 6, MedianSeconds(reps, [&] {
                    (void)tandem::numeric::FloatToHalf(params, absl::MakeSpan(half));
                  })});

  PrintRows(rows, n, reps);
  return sink == -1.0 ? 1 : 0;
}
