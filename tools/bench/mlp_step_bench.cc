// Training-step throughput of an MLP classifier on the CPU backend (one
// OpenBLAS thread by default), and sgemm GFLOP/s against the core's peak.
//
//   mlp_step_bench [--spec=mlp:784,1024,1024,10] [--batches=64,256]
//                  [--steps=30] [--repeats=5] [--threads=1]
//
// A step is Forward + Backward + an SGD-momentum update over the flat
// parameter vector (inline, as PyTorch's torch.optim.SGD does it). Prints one
// "RESULT" line per batch size with the median samples/s over the repeats,
// then the GEMM table. Synthetic data; speed is reported, never asserted.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// FLOP per cycle per core for fp32 FMA units, from the CPU flags, and the
// nominal clock in GHz (from "model name" "@ x.xxGHz" or else "cpu MHz").
void CorePeak(int* flop_per_cycle, double* ghz, std::string* what) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags, model;
  double mhz = 0;
  while (std::getline(in, line)) {
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (mhz == 0 && line.rfind("cpu MHz", 0) == 0) {
      mhz = std::atof(line.substr(line.find(':') + 1).c_str());
    }
  }
  const bool avx512 = flags.find(" avx512f") != std::string::npos;
  const bool fma = flags.find(" fma") != std::string::npos;
  const bool avx2 = flags.find(" avx2") != std::string::npos;
  // 2 FMA ports x (16 | 8) lanes x 2 FLOP.
  *flop_per_cycle = avx512 ? 64 : (avx2 && fma) ? 32 : 16;
  *ghz = mhz / 1000.0;
  const size_t at = model.find('@');
  if (at != std::string::npos) {
    const double nominal = std::atof(model.substr(at + 1).c_str());
    if (nominal > 0) *ghz = nominal;
  }
  *what = (avx512 ? "AVX-512" : (avx2 && fma) ? "AVX2+FMA" : "SSE") +
          std::string(", ") + model.substr(model.find(':') + 2);
}

struct Flags {
  std::string spec = "mlp:784,1024,1024,10";
  std::vector<int> batches = {64, 256};
  int steps = 30, repeats = 5, threads = 1;
};

// argv into *f; false (after a line on stderr) on a bad flag.
bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const size_t n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--spec=")) {
      f->spec = v;
    } else if (const char* v = value("--batches=")) {
      f->batches.clear();
      for (absl::string_view p : absl::StrSplit(v, ',')) {
        int b;
        if (!absl::SimpleAtoi(p, &b) || b <= 0) {
          std::fprintf(stderr, "bad --batches entry \"%s\"\n", std::string(p).c_str());
          return false;
        }
        f->batches.push_back(b);
      }
    } else if (const char* v = value("--steps=")) {
      f->steps = std::atoi(v);
    } else if (const char* v = value("--repeats=")) {
      f->repeats = std::atoi(v);
    } else if (const char* v = value("--threads=")) {
      f->threads = std::atoi(v);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return false;
    }
  }
  if (f->steps <= 0 || f->repeats <= 0 || f->threads <= 0) {
    std::fprintf(stderr, "--steps, --repeats and --threads must be positive\n");
    return false;
  }
  return true;
}

// The RESULT line of one batch size: median samples/s over the repeats.
int BenchBatch(tandem::kernels::CpuBackend& backend, const tandem::nn::ModelSpec& spec,
               const Flags& f, int batch) {
  const int in = spec.mlp.widths.front();
  const int classes = spec.mlp.widths.back();
  tandem::nn::ModelOptions mo;
  mo.max_batch = batch;
  auto model = tandem::nn::CreateModel(spec, &backend, mo);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  tandem::nn::Model& m = **model;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(batch) * in);
  for (float& v : x) v = nd(rng);
  std::vector<int32_t> y(batch);
  for (int i = 0; i < batch; ++i) y[i] = i % classes;
  float* params = m.storage().params();
  const float* grads = m.storage().grads();
  const int64_t n = m.storage().size();
  std::vector<float> velocity(n, 0.f);
  tandem::nn::Batch b;
  b.size = batch;
  b.features = x.data();
  b.labels = y.data();
  auto step = [&] {
    if (!m.Forward(b).ok() || !m.Backward(0.f, nullptr).ok()) std::abort();
    float* v = velocity.data();
    for (int64_t i = 0; i < n; ++i) {
      v[i] = 0.9f * v[i] + grads[i];
      params[i] -= 1e-3f * v[i];
    }
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < f.repeats; ++r) {
    const auto t0 = Clock::now();
    for (int s = 0; s < f.steps; ++s) step();
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    rates.push_back(static_cast<double>(f.steps) * batch / sec);
  }
  std::printf("RESULT tandem %s batch=%d threads=%d samples_per_s=%.1f "
              "(median of %d x %d steps; min %.1f max %.1f)\n",
              f.spec.c_str(), batch, f.threads, Median(rates), f.repeats, f.steps,
              *std::min_element(rates.begin(), rates.end()),
              *std::max_element(rates.begin(), rates.end()));
  return 0;
}

// sgemm GFLOP/s at the MLP's shapes against the core's peak.
void GemmTable(tandem::kernels::CpuBackend& backend, int threads) {
  int fpc = 0;
  double ghz = 0;
  std::string cpu;
  CorePeak(&fpc, &ghz, &cpu);
  const double peak = fpc * ghz * threads;
  std::printf("GEMM sgemm (OpenBLAS, %d thread(s)); peak %.1f GFLOP/s = %d FLOP/cycle x %.2f GHz x %d [%s]\n",
              threads, peak, fpc, ghz, threads, cpu.c_str());
  struct Shape { int m, n, k; const char* what; };
  const Shape shapes[] = {{64, 1024, 784, "fc0 fwd b64"},
                          {64, 1024, 1024, "fc1 fwd b64"},
                          {256, 1024, 1024, "fc1 fwd b256"},
                          {1024, 1024, 256, "fc1 dW b256"},
                          {1024, 1024, 1024, "square 1024"}};
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m) * s.k, 0.5f);
    std::vector<float> bm(static_cast<size_t>(s.k) * s.n, 0.25f);
    std::vector<float> c(static_cast<size_t>(s.m) * s.n);
    const double flop = 2.0 * s.m * s.n * s.k;
    const int iters = std::max(3, static_cast<int>(2e9 / flop));
    std::vector<double> g;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        backend.Gemm(tandem::kernels::Transpose::kNo, tandem::kernels::Transpose::kYes,
                     s.m, s.n, s.k, 1.f, a.data(), s.k, bm.data(), s.k, 0.f,
                     c.data(), s.n);
      }
      const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
      g.push_back(flop * iters / sec / 1e9);
    }
    const double med = Median(g);
    std::printf("GEMM %-13s m=%-5d n=%-5d k=%-5d %7.1f GFLOP/s  %5.1f%% of peak\n",
                s.what, s.m, s.n, s.k, med, peak > 0 ? 100.0 * med / peak : 0.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  tandem::kernels::BackendOptions bo;
  bo.cpu_threads = f.threads;
  tandem::kernels::CpuBackend backend(bo);
  absl::StatusOr<tandem::nn::ModelSpec> parsed = tandem::nn::ParseModelSpec(f.spec);
  if (!parsed.ok() || parsed->kind != tandem::nn::ModelSpec::Kind::kMlp) {
    std::fprintf(stderr, "%s\n", parsed.ok() ? "need an mlp: spec"
                                             : std::string(parsed.status().message()).c_str());
    return 2;
  }
  for (int batch : f.batches) {
    if (int rc = BenchBatch(backend, *parsed, f, batch); rc != 0) return rc;
  }
  GemmTable(backend, f.threads);
  return 0;
}
