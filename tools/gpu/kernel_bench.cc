// kernel_bench: times the CUDA backend's element-wise, reduction and
// optimizer kernels as memory bandwidth (GB/s of compulsory traffic) against
// a device-to-device cudaMemcpy measured in the same run, and cuBLAS GEMMs
// as TFLOP/s (fp32, TF32, bf16 tensor cores on fp32 data, bf16 storage).
// Medians of --iters timed runs (CUDA events) after warm-up. Prints a table
// (one line per kernel as soon as it is measured, flushed, so a run cut off
// by a deadline still shows what it measured); runs on a GPU machine via
// tools/gpu/check.sh. Not a test: it asserts nothing and exits non-zero only
// when the device or a call fails.
//
// Errors are named where they arise: the warm-up runs with the backend's
// check_each_call on (a sync after every launch), launch errors of the raw
// optimizer launchers are checked, and every timed loop ends with a
// synchronisation whose error carries the kernel's name. All work, buffer
// clears included, is on the backend's non-blocking stream (the legacy
// stream does not order against it).
//
//   kernel_bench [--elements=67108864] [--iters=20] [--gemm=4096]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/kernels/backend.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "common/kernels/cuda/cuda_status.h"
#include "common/kernels/cuda/device.h"
#include "common/kernels/cuda/optimizer_kernels.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace cuda {
namespace {

struct Options {
  int64_t elements = int64_t{1} << 26;  // 256 MiB per fp32 buffer
  int iters = 20;
  int gemm = 4096;
};

class Bench {
 public:
  Bench(CudaBackend* backend, int iters) : backend_(backend), iters_(iters) {}

  // Median milliseconds of `f` over iters_ runs after 3 warm-up runs; an
  // error names `what`.
  absl::StatusOr<double> MedianMs(const std::string& what,
                                  const std::function<void()>& f) {
    absl::StatusOr<double> ms = MedianMsInner(f);
    if (!ms.ok()) {
      return absl::Status(ms.status().code(),
                          absl::StrCat(what, ": ", ms.status().message()));
    }
    return ms;
  }

 private:
  absl::StatusOr<double> MedianMsInner(const std::function<void()>& f) {
    cudaStream_t s = backend_->stream();
    // Anything still queued belongs to the previous kernel: settle it first.
    RETURN_IF_ERROR(backend_->Synchronize());
    cudaEvent_t start, stop;
    RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
    RETURN_IF_CUDA_ERROR(cudaEventCreate(&stop), "cudaEventCreate");
    backend_->set_check_each_call(true);
    for (int i = 0; i < 3; ++i) f();
    backend_->set_check_each_call(false);
    std::vector<double> ms;
    absl::Status status = backend_->Synchronize();
    for (int i = 0; i < iters_ && status.ok(); ++i) {
      cudaEventRecord(start, s);
      f();
      cudaEventRecord(stop, s);
      status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float t = 0.0f;
      if (status.ok()) {
        status = CudaStatus(cudaEventElapsedTime(&t, start, stop),
                            "cudaEventElapsedTime");
      }
      ms.push_back(t);
    }
    if (status.ok()) status = backend_->Synchronize();
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    RETURN_IF_ERROR(status);
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  CudaBackend* backend_;
  int iters_;
};

// One table row per kernel: GB/s of compulsory traffic against the
// device-to-device memcpy measured first.
class Reporter {
 public:
  Reporter(Bench* bench, int64_t n, double copy_gbs) : bench_(bench), n_(n), copy_gbs_(copy_gbs) {}

  absl::Status Report(const char* name, double bytes_per_elem, const std::function<void()>& f) {
    ASSIGN_OR_RETURN(double ms, bench_->MedianMs(name, f));
    const double gbs = bytes_per_elem * n_ / (ms * 1e6);
    std::printf("%-34s %12.1f %10.3f %10.1f %8.1f%%\n", name, bytes_per_elem,
                ms, gbs, 100.0 * gbs / copy_gbs_);
    std::fflush(stdout);
    return absl::OkStatus();
  }

 private:
  Bench* bench_;
  int64_t n_;
  double copy_gbs_;
};

// The element-wise passes' buffers: five of n floats and a 1 MiB scratch.
struct Buffers {
  kernels::DeviceBuffer x, y, z, w, m, small;
  float *X, *Y, *Z, *W, *M, *S;
};

absl::StatusOr<Buffers> AllocateBuffers(CudaBackend* be, int64_t n) {
  const size_t bytes = n * sizeof(float);
  Buffers b;
  for (kernels::DeviceBuffer* buf : {&b.x, &b.y, &b.z, &b.w, &b.m}) {
    ASSIGN_OR_RETURN(*buf, be->Allocate(bytes));
  }
  ASSIGN_OR_RETURN(b.small, be->Allocate(1 << 20));
  b.X = b.x.f32(), b.Y = b.y.f32(), b.Z = b.z.f32(), b.W = b.w.f32(), b.M = b.m.f32();
  b.S = b.small.f32();
  // Filled on the device (values do not change the kernels' memory traffic).
  be->Fill(b.X, n, 0.5f);
  be->Fill(b.Y, n, -0.25f);
  be->Fill(b.Z, n, 0.75f);
  be->Fill(b.W, n, 0.1f);
  be->Fill(b.M, n, 0.0f);
  be->Fill(b.S, (1 << 20) / 4, 1.0f);
  RETURN_IF_ERROR(be->Synchronize());
  return b;
}

// The memcpy reference row (and the table's header); its GB/s.
absl::StatusOr<double> MeasureCopy(CudaBackend* be, Bench& bench, Buffers& b, int64_t n) {
  const size_t bytes = n * sizeof(float);
  ASSIGN_OR_RETURN(double copy_ms, bench.MedianMs("memcpy_d2d", [&] {
                     be->Copy(b.y.data(), b.x.data(), bytes);
                   }));
  const double copy_gbs = 2.0 * bytes / (copy_ms * 1e6);
  std::printf("\n%-34s %12s %10s %10s %9s\n", "kernel", "bytes/elem",
              "median_ms", "GB/s", "%memcpy");
  std::printf("%-34s %12d %10.3f %10.1f %8.1f%%\n", "memcpy_d2d", 8, copy_ms,
              copy_gbs, 100.0);
  std::fflush(stdout);
  return copy_gbs;
}

absl::Status BenchElementwise(CudaBackend* be, Reporter& r, const Buffers& b, int64_t n) {
  float *X = b.X, *Y = b.Y, *Z = b.Z, *W = b.W, *S = b.S;
  const int cols = 1024;
  const int rows = static_cast<int>(n / cols);
  RETURN_IF_ERROR(r.Report("fill", 4, [&] { be->Fill(Y, n, 1.0f); }));
  RETURN_IF_ERROR(r.Report("scale", 8, [&] { be->Scale(n, 0.999f, Y); }));
  RETURN_IF_ERROR(r.Report("axpy", 12, [&] { be->Axpy(n, 0.5f, X, Y); }));
  RETURN_IF_ERROR(r.Report("add", 12, [&] { be->Add(n, X, Y, Z); }));
  RETURN_IF_ERROR(r.Report("sum_squares", 4, [&] { be->SumSquares(n, X, S); }));
  RETURN_IF_ERROR(
      r.Report("count_non_finite", 4, [&] { be->CountNonFinite(n, X, S); }));
  RETURN_IF_ERROR(r.Report("cast_f32_to_bf16", 6, [&] {
    be->CastF32ToBf16(n, X, reinterpret_cast<uint16_t*>(W));
  }));
  RETURN_IF_ERROR(r.Report("cast_bf16_to_f32", 6, [&] {
    be->CastBf16ToF32(n, reinterpret_cast<const uint16_t*>(W), Z);
  }));
  RETURN_IF_ERROR(r.Report("bias_relu_fwd 1024 cols", 12, [&] {
    be->BiasActivationForward(kernels::Activation::kRelu, rows, cols, S, Z, Y);
  }));
  RETURN_IF_ERROR(r.Report("bias_gelu_fwd 1024 cols", 12, [&] {
    be->BiasActivationForward(kernels::Activation::kGelu, rows, cols, S, Z, Y);
  }));
  RETURN_IF_ERROR(r.Report("bias_gelu_bwd+dbias 1024 cols", 12, [&] {
    be->BiasActivationBackward(kernels::Activation::kGelu, rows, cols, X, Y, Z,
                               S, 0.0f);
  }));
  RETURN_IF_ERROR(r.Report("layernorm_fwd 1024 cols", 8, [&] {
    be->LayerNormForward(rows, cols, 1e-5f, X, S, S, Y, W, W + rows);
  }));
  be->LayerNormForward(rows, cols, 1e-5f, X, S, S, Y, W, W + rows);
  return r.Report("layernorm_bwd 1024 cols", 20, [&] {
    be->LayerNormBackward(rows, cols, X, S, W, W + rows, Y, Z, S + 4096,
                          S + 8192, 0.0f);
  });
}

// Cross-entropy, causal softmax, embedding and the head split.
absl::Status BenchTransformer(CudaBackend* be, Reporter& r, const Buffers& b, int64_t n) {
  float *X = b.X, *Y = b.Y, *Z = b.Z, *W = b.W, *S = b.S;
  {
    const int classes = 32768;
    const int xrows = static_cast<int>(n / classes);
    int32_t* labels = reinterpret_cast<int32_t*>(S + 65536);
    // On the backend's stream: a legacy-stream cudaMemset would not be
    // ordered before the kernels that read the labels.
    RETURN_IF_CUDA_ERROR(cudaMemsetAsync(labels, 0, xrows * sizeof(int32_t),
                                         be->stream()),
                         "cudaMemsetAsync labels");
    RETURN_IF_ERROR(r.Report("softmax_xent_fwd 32768 classes", 8, [&] {
      be->SoftmaxCrossEntropyForward(xrows, classes, X, labels, 1.0f, Y, S);
    }));
    RETURN_IF_ERROR(r.Report("softmax_xent_bwd 32768 classes", 8, [&] {
      be->SoftmaxCrossEntropyBackward(xrows, classes, Y, labels, 1.0f, Z);
    }));
  }
  {
    const int seq = 1024;
    const int batch = static_cast<int>(n / (int64_t{seq} * seq));
    // Reads the lower triangle (about half), writes everything.
    RETURN_IF_ERROR(r.Report("causal_softmax_fwd seq 1024", 6, [&] {
      be->CausalSoftmaxForward(batch, seq, 0.125f, X, Y);
    }));
    RETURN_IF_ERROR(r.Report("causal_softmax_bwd seq 1024", 8, [&] {
      be->CausalSoftmaxBackward(batch, seq, 0.125f, Y, X, Z);
    }));
  }
  const int dim = 1024, seq = 1024;
  const int batch = static_cast<int>(n / (int64_t{dim} * seq));
  int32_t* ids = reinterpret_cast<int32_t*>(S + 65536);
  RETURN_IF_CUDA_ERROR(
      cudaMemsetAsync(ids, 0, int64_t{batch} * seq * 4, be->stream()),
      "cudaMemsetAsync ids");
  // Token rows all hit row 0 (cached): count the output and position reads.
  RETURN_IF_ERROR(r.Report("embedding_fwd dim 1024", 8, [&] {
    be->EmbeddingForward(batch, seq, dim, ids, W, W + int64_t{dim} * 4096, Y);
  }));
  return r.Report("split_heads n=3 (fused qkv)", 8, [&] {
    be->SplitHeads(batch / 3 > 0 ? batch / 3 : 1, seq, 3, 16, 64, X, Y);
  });
}

absl::Status BenchOptimizers(CudaBackend* be, Reporter& r, const Buffers& b, int64_t n) {
  float *X = b.X, *Y = b.Y, *Z = b.Z, *M = b.M;
  SgdStepArgs sgd;
  sgd.lr = 0.01f;
  sgd.momentum = 0.9f;
  sgd.weight_decay = 1e-4f;
  // The raw launchers return their launch error: keep the first one.
  absl::Status launch;
  auto keep = [&launch](cudaError_t e, const char* what) {
    if (e != cudaSuccess && launch.ok()) launch = CudaStatus(e, what);
  };
  RETURN_IF_ERROR(r.Report("sgd_momentum_step", 20, [&] {
    keep(LaunchSgdStep(n, sgd, Y, X, Z, be->stream()), "LaunchSgdStep");
  }));
  RETURN_IF_ERROR(launch);
  AdamWStepArgs adam;
  adam.step_size = 1e-3f;
  RETURN_IF_ERROR(r.Report("adamw_step", 28, [&] {
    keep(LaunchAdamWStep(n, adam, Y, X, Z, M, be->stream()),
         "LaunchAdamWStep");
  }));
  return launch;
}

// GEMMs of g x g: fp32 data (three math modes) and bf16 storage.
absl::Status BenchGemms(CudaBackend* be, Bench& bench, int g) {
  const size_t gbytes = size_t{static_cast<size_t>(g)} * g * sizeof(float);
  ASSIGN_OR_RETURN(kernels::DeviceBuffer a, be->Allocate(gbytes));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer b, be->Allocate(gbytes));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer c, be->Allocate(gbytes));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer a16, be->Allocate(gbytes / 2));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer b16, be->Allocate(gbytes / 2));
  const int64_t gn = int64_t{g} * g;
  be->Fill(a.f32(), gn, 0.01f);
  be->Fill(b.f32(), gn, 0.02f);
  be->CastF32ToBf16(gn, a.f32(), a16.u16());
  be->CastF32ToBf16(gn, b.f32(), b16.u16());
  RETURN_IF_ERROR(be->Synchronize());
  const double flops = 2.0 * g * g * g;
  std::printf("\n%-34s %12s %10s %10s\n", "gemm (row-major, C=A*B^T)", "m=n=k",
              "median_ms", "TFLOP/s");
  struct Mode {
    const char* name;
    GemmMath math;
  };
  absl::Status gemm_status;
  for (Mode mode : {Mode{"sgemm fp32", GemmMath::kFp32},
                    Mode{"fp32 data, tf32 tensor cores", GemmMath::kTf32},
                    Mode{"fp32 data, bf16 tensor cores", GemmMath::kBf16}}) {
    ASSIGN_OR_RETURN(double ms, bench.MedianMs(mode.name, [&] {
                       gemm_status.Update(be->gemm().Gemm(
                           mode.math, false, true, g, g, g, 1.0f, a.f32(), g,
                           b.f32(), g, 0.0f, c.f32(), g));
                     }));
    RETURN_IF_ERROR(gemm_status);
    std::printf("%-34s %12d %10.3f %10.1f\n", mode.name, g, ms,
                flops / (ms * 1e9));
    std::fflush(stdout);
  }
  for (bool c_bf16 : {false, true}) {
    ASSIGN_OR_RETURN(double ms, bench.MedianMs("gemm bf16", [&] {
                       gemm_status.Update(be->gemm().GemmBf16(
                           false, true, g, g, g, 1.0f, a16.u16(), g, b16.u16(),
                           g, 0.0f, c.data(), c_bf16, g));
                     }));
    RETURN_IF_ERROR(gemm_status);
    std::printf("%-34s %12d %10.3f %10.1f\n",
                c_bf16 ? "bf16 in, fp32 acc, bf16 out"
                       : "bf16 in, fp32 acc, fp32 out",
                g, ms, flops / (ms * 1e9));
  }
  return be->Synchronize();
}

absl::Status Run(const Options& opt) {
  ASSIGN_OR_RETURN(DeviceInfo info, ProbeDevice(0));
  std::printf("device: %s\n", DescribeDevice(info).c_str());
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> be,
                   CudaBackend::Create(kernels::BackendOptions()));
  Bench bench(be.get(), opt.iters);
  const int64_t n = opt.elements;
  {
    ASSIGN_OR_RETURN(Buffers buffers, AllocateBuffers(be.get(), n));
    ASSIGN_OR_RETURN(const double copy_gbs, MeasureCopy(be.get(), bench, buffers, n));
    Reporter r(&bench, n, copy_gbs);
    RETURN_IF_ERROR(BenchElementwise(be.get(), r, buffers, n));
    RETURN_IF_ERROR(BenchTransformer(be.get(), r, buffers, n));
    RETURN_IF_ERROR(BenchOptimizers(be.get(), r, buffers, n));
  }  // the element-wise buffers go back before the GEMMs allocate theirs
  return BenchGemms(be.get(), bench, opt.gemm);
}

}  // namespace
}  // namespace cuda
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::cuda::Options opt;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strncmp(arg, "--elements=", 11) == 0) {
      opt.elements = std::atoll(arg + 11);
    } else if (std::strncmp(arg, "--iters=", 8) == 0) {
      opt.iters = std::atoi(arg + 8);
    } else if (std::strncmp(arg, "--gemm=", 7) == 0) {
      opt.gemm = std::atoi(arg + 7);
    } else {
      std::fprintf(stderr,
                   "usage: kernel_bench [--elements=N] [--iters=N] "
                   "[--gemm=N]\n");
      return 2;
    }
  }
  if (opt.elements < (int64_t{1} << 22) || opt.iters < 1 || opt.gemm < 64) {
    std::fprintf(stderr, "kernel_bench: need --elements >= 4194304, "
                         "--iters >= 1, --gemm >= 64\n");
    return 2;
  }
  absl::Status status = tandem::cuda::Run(opt);
  if (!status.ok()) {
    std::fprintf(stderr, "kernel_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
