// gpt_step_bench: tokens/s of one GPT training step (forward, backward and a
// fused AdamW update over the flat parameter vector) on the CUDA backend,
// for comparison with PyTorch eager on the same model (gpt_step_torch.py).
// Median of --iters steps (CUDA events) after 3 warm-up steps; prints the
// first and last loss as a sanity check (about ln(vocab) at the start).
// Runs on a GPU machine via tools/gpu/check.sh; exits non-zero on failure.
// With --profile_out it also writes a measured `tandem plan` profile: the
// step's model FLOP rate as the GEMM rate, a device-to-device copy as the
// memory rate and the device's memory, with NVLink and the node network
// from the matching datasheet (one GPU cannot measure those).
//
//   gpt_step_bench [--spec=gpt:layers=12,heads=12,width=768,context=1024,vocab=50304]
//                  [--batch=8] [--iters=10] [--math=fp32|tf32|bf16]
//                  [--profile_out=PATH]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kernels/backend.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "common/kernels/cuda/cuda_status.h"
#include "common/kernels/cuda/optimizer_kernels.h"
#include "common/nn/model.h"
#include "common/nn/model_spec.h"
#include "common/optim/adamw.h"
#include "common/plan/gpu_profile.h"
#include "common/plan/machine_profile.h"
#include "common/plan/model_cost.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace cuda {
namespace {

struct Options {
  std::string spec = "gpt:layers=12,heads=12,width=768,context=1024,vocab=50304";
  int batch = 8;
  int iters = 10;
  std::string math = "fp32";
  std::string profile_out;  // "" = write no plan profile
};

// Device-to-device copy rate (bytes read + written per second), median of 5.
absl::StatusOr<double> CopyBytesPerSecond(kernels::Backend* be, cudaStream_t stream) {
  constexpr int64_t kBytes = int64_t{256} << 20;
  ASSIGN_OR_RETURN(kernels::DeviceBuffer a, be->Allocate(kBytes));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer b, be->Allocate(kBytes));
  cudaEvent_t start, stop;
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int i = 0; i < 6; ++i) {
    cudaEventRecord(start, stream);
    be->Copy(b.data(), a.data(), kBytes);
    cudaEventRecord(stop, stream);
    RETURN_IF_CUDA_ERROR(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&t, start, stop), "elapsed");
    if (i > 0) ms.push_back(t);  // the first is a warm-up
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return 2.0 * kBytes / (ms[ms.size() / 2] * 1e-3);
}

// The measured profile: this device's rates over the datasheet of the part
// its name matches (H200, H100, A100; else H100's links, said so).
absl::Status WriteMeasuredProfile(const Options& opt, kernels::Backend* be, cudaStream_t stream,
                                  double step_ms) {
  ASSIGN_OR_RETURN(nn::ModelSpec spec, nn::ParseModelSpec(opt.spec));
  ASSIGN_OR_RETURN(plan::ModelCost cost, plan::ModelCostOf(spec));
  cudaDeviceProp prop;
  RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const std::string name = prop.name;
  std::string sheet = "h100";
  std::string matched = "no datasheet matches this device; the H100's links are assumed";
  for (const char* part : {"H200", "H100", "A100"}) {
    if (name.find(part) == std::string::npos) continue;
    sheet = part;
    std::transform(sheet.begin(), sheet.end(), sheet.begin(), ::tolower);
    matched = absl::StrCat("NVLink and node network from the ", part, " datasheet x 0.80");
    break;
  }
  plan::GpuProfileOptions g;
  g.gpu = sheet;
  g.math = opt.math;
  ASSIGN_OR_RETURN(plan::MachineProfile p, plan::GpuProfile(g));
  ASSIGN_OR_RETURN(double copy, CopyBytesPerSecond(be, stream));
  p.gemm_flops_per_s = cost.train_flops * opt.batch / (step_ms * 1e-3);
  p.stream_bytes_per_s = copy;
  p.codec_bytes_per_s = copy / 1.25;
  p.memory_bytes_per_rank = static_cast<double>(prop.totalGlobalMem);
  p.source = absl::StrFormat(
      "measured on %s by gpt_step_bench (%s, batch %d, %s: model %.1f TFLOP/s; device copy %.0f "
      "GB/s); %s",
      name, opt.spec, opt.batch, opt.math, p.gemm_flops_per_s / 1e12, copy / 1e9, matched);
  RETURN_IF_ERROR(plan::SaveMachineProfile(p, opt.profile_out));
  std::printf("plan profile written to %s: %s\n", opt.profile_out.c_str(), p.source.c_str());
  return absl::OkStatus();
}

absl::StatusOr<float> ReadLoss(kernels::Backend* be, nn::Model& model) {
  float loss = 0.0f;
  RETURN_IF_ERROR(be->CopyToHost(&loss, model.loss(), sizeof(float)));
  return loss;
}

// Median milliseconds of `step` over `iters` runs, timed by CUDA events on
// `stream`.
absl::StatusOr<double> MedianStepMs(cudaStream_t stream, int iters,
                                    const std::function<absl::Status()>& step) {
  cudaEvent_t start, stop;
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  absl::Status status;
  for (int i = 0; i < iters && status.ok(); ++i) {
    cudaEventRecord(start, stream);
    status = step();
    cudaEventRecord(stop, stream);
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0.0f;
    if (status.ok()) status = CudaStatus(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  RETURN_IF_ERROR(status);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

absl::Status Run(const Options& opt) {
  kernels::BackendOptions bo;
  bo.device = "cuda";
  bo.allow_cpu_fallback = false;
  if (opt.math == "tf32") bo.math_mode = kernels::MathMode::kTf32;
  else if (opt.math == "bf16") bo.math_mode = kernels::MathMode::kBf16;
  else if (opt.math != "fp32") return absl::InvalidArgumentError("--math must be fp32, tf32 or bf16");
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> be, CudaBackend::Create(bo));
  nn::ModelOptions mo;
  mo.max_batch = opt.batch;
  mo.seed = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model,
                   nn::CreateModel(opt.spec, be.get(), mo));
  const int context = model->rows_per_sample();
  const int vocab = model->num_classes();
  const int64_t tokens = int64_t{opt.batch} * context;
  const int64_t n = model->storage().size();

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> host_tokens(tokens + 1);
  for (int32_t& t : host_tokens) t = dist(rng);
  ASSIGN_OR_RETURN(kernels::DeviceBuffer ids, be->Allocate(tokens * 4));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer labels, be->Allocate(tokens * 4));
  RETURN_IF_ERROR(be->CopyToDevice(ids.data(), host_tokens.data(), tokens * 4));
  RETURN_IF_ERROR(
      be->CopyToDevice(labels.data(), host_tokens.data() + 1, tokens * 4));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer exp_avg, be->Allocate(n * 4));
  ASSIGN_OR_RETURN(kernels::DeviceBuffer exp_avg_sq, be->Allocate(n * 4));
  be->Fill(exp_avg.f32(), n, 0.0f);
  be->Fill(exp_avg_sq.f32(), n, 0.0f);

  nn::Batch batch;
  batch.size = opt.batch;
  batch.tokens = ids.i32();
  batch.labels = labels.i32();
  optim::AdamWOptions adam;
  int64_t step = 0;
  auto train_step = [&]() -> absl::Status {
    RETURN_IF_ERROR(model->Forward(batch));
    RETURN_IF_ERROR(model->Backward(0.0f, nn::GradReadyCallback(), 1.0f));
    ++step;
    const optim::AdamWScalars s = optim::ComputeAdamWScalars(adam, step, 3e-4f);
    AdamWStepArgs a;
    a.beta1 = adam.beta1;
    a.beta2 = adam.beta2;
    a.eps = adam.eps;
    a.decay = s.decay;
    a.step_size = s.step_size;
    a.inv_sqrt_bc2 = s.inv_sqrt_bc2;
    a.one_minus_beta1 = s.one_minus_beta1;
    a.one_minus_beta2 = s.one_minus_beta2;
    RETURN_IF_CUDA_ERROR(
        LaunchAdamWStep(n, a, model->storage().params(),
                        model->storage().grads(), exp_avg.f32(),
                        exp_avg_sq.f32(), be->stream()),
        "AdamW step");
    return absl::OkStatus();
  };

  // Warm-up with a sync after every op, so a faulting kernel is named.
  be->set_check_each_call(true);
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(train_step());
  be->set_check_each_call(false);
  RETURN_IF_ERROR(be->Synchronize());
  ASSIGN_OR_RETURN(float first_loss, ReadLoss(be.get(), *model));
  ASSIGN_OR_RETURN(const double med, MedianStepMs(be->stream(), opt.iters, train_step));
  RETURN_IF_ERROR(be->Synchronize());
  ASSIGN_OR_RETURN(float last_loss, ReadLoss(be.get(), *model));
  std::printf("gpt_step tandem %s batch=%d math=%s params=%lld: median %.2f ms, "
              "%.0f tokens/s, loss %.4f -> %.4f\n",
              opt.spec.c_str(), opt.batch, opt.math.c_str(),
              static_cast<long long>(n), med, tokens / (med * 1e-3),
              first_loss, last_loss);
  if (!opt.profile_out.empty()) return WriteMeasuredProfile(opt, be.get(), be->stream(), med);
  return absl::OkStatus();
}

}  // namespace
}  // namespace cuda
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::cuda::Options opt;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strncmp(arg, "--spec=", 7) == 0) {
      opt.spec = arg + 7;
    } else if (std::strncmp(arg, "--batch=", 8) == 0) {
      opt.batch = std::atoi(arg + 8);
    } else if (std::strncmp(arg, "--iters=", 8) == 0) {
      opt.iters = std::atoi(arg + 8);
    } else if (std::strncmp(arg, "--math=", 7) == 0) {
      opt.math = arg + 7;
    } else if (std::strncmp(arg, "--profile_out=", 14) == 0) {
      opt.profile_out = arg + 14;
    } else {
      std::fprintf(stderr, "usage: gpt_step_bench [--spec=gpt:...] [--batch=N] "
                           "[--iters=N] [--math=fp32|tf32|bf16] [--profile_out=PATH]\n");
      return 2;
    }
  }
  if (opt.batch < 1 || opt.iters < 1) {
    std::fprintf(stderr, "gpt_step_bench: --batch and --iters must be >= 1\n");
    return 2;
  }
  absl::Status status = tandem::cuda::Run(opt);
  if (!status.ok()) {
    std::fprintf(stderr, "gpt_step_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
