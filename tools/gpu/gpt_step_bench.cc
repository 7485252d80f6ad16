// gpt_step_bench: tokens/s of one GPT training step (forward, backward and a
// fused AdamW update over the flat parameter vector) on the CUDA backend,
// for comparison with PyTorch eager on the same model (gpt_step_torch.py).
// Median of --iters steps (CUDA events) after 3 warm-up steps; prints the
// first and last loss as a sanity check (about ln(vocab) at the start).
// Runs on a GPU machine via tools/gpu/check.sh; exits non-zero on failure.
//
//   gpt_step_bench [--spec=gpt:layers=12,heads=12,width=768,context=1024,vocab=50304]
//                  [--batch=8] [--iters=10] [--math=fp32|tf32|bf16]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/kernels/backend.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "common/kernels/cuda/cuda_status.h"
#include "common/kernels/cuda/optimizer_kernels.h"
#include "common/nn/model.h"
#include "common/optim/adamw.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace cuda {
namespace {

struct Options {
  std::string spec = "gpt:layers=12,heads=12,width=768,context=1024,vocab=50304";
  int batch = 8;
  int iters = 10;
  std::string math = "fp32";
};

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
  auto read_loss = [&]() -> absl::StatusOr<float> {
    float loss = 0.0f;
    RETURN_IF_ERROR(be->CopyToHost(&loss, model->loss(), sizeof(float)));
    return loss;
  };

  // Warm-up with a sync after every op, so a faulting kernel is named.
  be->set_check_each_call(true);
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(train_step());
  be->set_check_each_call(false);
  RETURN_IF_ERROR(be->Synchronize());
  ASSIGN_OR_RETURN(float first_loss, read_loss());
  cudaEvent_t start, stop;
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
  RETURN_IF_CUDA_ERROR(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int i = 0; i < opt.iters; ++i) {
    cudaEventRecord(start, be->stream());
    RETURN_IF_ERROR(train_step());
    cudaEventRecord(stop, be->stream());
    RETURN_IF_CUDA_ERROR(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0.0f;
    RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
  }
  RETURN_IF_ERROR(be->Synchronize());
  ASSIGN_OR_RETURN(float last_loss, read_loss());
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  std::printf("gpt_step tandem %s batch=%d math=%s params=%lld: median %.2f ms, "
              "%.0f tokens/s, loss %.4f -> %.4f\n",
              opt.spec.c_str(), opt.batch, opt.math.c_str(),
              static_cast<long long>(n), med, tokens / (med * 1e-3),
              first_loss, last_loss);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
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
    } else {
      std::fprintf(stderr, "usage: gpt_step_bench [--spec=gpt:...] [--batch=N] "
                           "[--iters=N] [--math=fp32|tf32|bf16]\n");
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
