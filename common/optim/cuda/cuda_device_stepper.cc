#include "common/optim/cuda/cuda_device_stepper.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/kernels/cuda/optimizer_kernels.h"
#include "common/optim/adamw.h"
#include "common/optim/device_stepper_registry.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace optim {

CudaDeviceStepper::CudaDeviceStepper(cuda::CudaBackend* backend,
                                     optim::Optimizer* host_optimizer)
    : backend_(backend), host_(host_optimizer) {}

CudaDeviceStepper::~CudaDeviceStepper() {
  for (float* p : state_) backend_->Free(p);
  if (scratch_ != nullptr) backend_->Free(scratch_);
}

absl::StatusOr<std::unique_ptr<CudaDeviceStepper>> CudaDeviceStepper::Create(
    cuda::CudaBackend* backend, optim::Optimizer* host_optimizer) {
  if (backend == nullptr || host_optimizer == nullptr) {
    return absl::InvalidArgumentError("cuda device stepper: a backend and an optimizer are required");
  }
  if (dynamic_cast<optim::Sgd*>(host_optimizer) == nullptr &&
      dynamic_cast<optim::AdamW*>(host_optimizer) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda device stepper: optimizer '", host_optimizer->name(),
        "' has no fused CUDA kernel (use sgd or adamw)"));
  }
  std::unique_ptr<CudaDeviceStepper> s(new CudaDeviceStepper(backend, host_optimizer));
  ASSIGN_OR_RETURN(void* scratch, backend->AllocateRaw(sizeof(float)));
  s->scratch_ = static_cast<float*>(scratch);
  for (const optim::StateBuffer& b : host_optimizer->state()) {
    ASSIGN_OR_RETURN(void* p, backend->AllocateRaw(std::max<size_t>(1, b.data.size()) *
                                                   sizeof(float)));
    s->state_.push_back(static_cast<float*>(p));
    backend->Fill(s->state_.back(), static_cast<int64_t>(b.data.size()), 0.f);
  }
  return s;
}

absl::Status CudaDeviceStepper::LoadState() {
  std::vector<optim::StateBuffer> host = host_->state();
  for (size_t i = 0; i < host.size() && i < state_.size(); ++i) {
    RETURN_IF_ERROR(backend_->CopyToDevice(state_[i], host[i].data.data(),
                                           host[i].data.size() * sizeof(float)));
  }
  return absl::OkStatus();
}

absl::Status CudaDeviceStepper::SaveState() {
  std::vector<optim::StateBuffer> host = host_->state();
  for (size_t i = 0; i < host.size() && i < state_.size(); ++i) {
    RETURN_IF_ERROR(backend_->CopyToHost(host[i].data.data(), state_[i],
                                         host[i].data.size() * sizeof(float)));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CudaDeviceStepper::SumOfSquares(const float* grads, int64_t n) {
  backend_->SumSquares(n, grads, scratch_);
  float sum = 0;
  RETURN_IF_ERROR(backend_->CopyToHost(&sum, scratch_, sizeof(float)));
  return static_cast<double>(sum);
}

absl::Status CudaDeviceStepper::Step(float* params, const float* grads, int64_t n,
                                     const optim::StepContext& ctx) {
  if (n != host_->range().size()) {
    return absl::InvalidArgumentError(absl::StrCat("cuda device stepper: step over ", n,
                                                   " floats, optimizer covers ",
                                                   host_->range().size()));
  }
  cudaError_t err = cudaSuccess;
  if (auto* sgd = dynamic_cast<optim::Sgd*>(host_)) {
    cuda::SgdStepArgs a;
    a.lr = ctx.lr;
    a.momentum = sgd->options().momentum;
    a.nesterov = sgd->options().nesterov;
    a.weight_decay = sgd->options().weight_decay;
    a.grad_scale = ctx.grad_scale;
    err = cuda::LaunchSgdStep(n, a, params, grads, state_.empty() ? nullptr : state_[0],
                              backend_->stream());
  } else {
    auto* adamw = static_cast<optim::AdamW*>(host_);
    const optim::AdamWOptions& o = adamw->options();
    const optim::AdamWScalars sc = optim::ComputeAdamWScalars(o, ctx.step, ctx.lr);
    cuda::AdamWStepArgs a;
    a.beta1 = o.beta1;
    a.beta2 = o.beta2;
    a.eps = o.eps;
    a.grad_scale = ctx.grad_scale;
    a.decay = sc.decay;
    a.step_size = sc.step_size;
    a.inv_sqrt_bc2 = sc.inv_sqrt_bc2;
    a.one_minus_beta1 = sc.one_minus_beta1;
    a.one_minus_beta2 = sc.one_minus_beta2;
    err = cuda::LaunchAdamWStep(n, a, params, grads, state_[0], state_[1], backend_->stream());
  }
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cuda device stepper: ", host_->name(),
                                            " kernel launch failed: ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
}

namespace {

// Every binary that links this library can finish steps on the "cuda"
// backend (CudaBackend::name()).
const bool kRegistered = RegisterDeviceStepper(
    "cuda", [](kernels::Backend* backend, optim::Optimizer* host)
                -> absl::StatusOr<std::unique_ptr<DeviceStepper>> {
      auto* cuda_backend = dynamic_cast<cuda::CudaBackend*>(backend);
      if (cuda_backend == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "cuda device stepper: backend '", backend == nullptr ? "null" : backend->name(),
            "' is not a CudaBackend"));
      }
      ASSIGN_OR_RETURN(std::unique_ptr<CudaDeviceStepper> s,
                       CudaDeviceStepper::Create(cuda_backend, host));
      return std::unique_ptr<DeviceStepper>(std::move(s));
    });

}  // namespace

}  // namespace optim
}  // namespace tandem
