// CudaDeviceStepper: the DeviceStepper (device_stepper.h) for a CudaBackend.
// The gradient norm is the backend's SumSquares (fp32 on the device, one
// float copied back); the update is the fused SGD / AdamW kernel
// (common/kernels/cuda/optimizer_kernels.h) on the backend's stream, with
// the same options and per-step scalars as the host optimizer it mirrors.
//
//   ASSIGN_OR_RETURN(auto stepper, CudaDeviceStepper::Create(cuda_backend, host_optimizer));
//   RETURN_IF_ERROR(stepper->LoadState());   // host state -> device (restore)
//   o.device_stepper = stepper.get();         // AllreduceSyncOptions
//   ...
//   RETURN_IF_ERROR(stepper->SaveState());   // device state -> host (checkpoint)
//
// Strategies built by the registry get it without naming it: this library
// (alwayslink) registers it for backend "cuda" (device_stepper_registry.h),
// so SyncEnv::make_device_stepper = DeviceStepperFactoryFor(backend).
//
// Device state (momentum, or exp_avg / exp_avg_sq) is allocated once in
// Create, one buffer per host StateBuffer, in the same order; nothing is
// allocated per step. The host optimizer (optim::Sgd or optim::AdamW over
// [0, n)) is borrowed: it supplies the options and is the host copy of the
// state for checkpoints; it is never stepped.
//
// Thread-compatible: one thread at a time (the trainer thread), like the
// backend. Failure: Create returns InvalidArgument for an optimizer that is
// not Sgd / AdamW, ResourceExhausted when device memory runs out; Step and
// SumOfSquares return the launch / copy error (the backend keeps the first
// asynchronous error and reports it on the next copy).
#ifndef TANDEM_COMMON_OPTIM_CUDA_CUDA_DEVICE_STEPPER_H_
#define TANDEM_COMMON_OPTIM_CUDA_CUDA_DEVICE_STEPPER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace optim {

class CudaDeviceStepper final : public DeviceStepper {
 public:
  // `backend` and `host_optimizer` are borrowed and must outlive this.
  static absl::StatusOr<std::unique_ptr<CudaDeviceStepper>> Create(
      cuda::CudaBackend* backend, optim::Optimizer* host_optimizer);
  ~CudaDeviceStepper() override;
  CudaDeviceStepper(const CudaDeviceStepper&) = delete;
  CudaDeviceStepper& operator=(const CudaDeviceStepper&) = delete;

  absl::StatusOr<double> SumOfSquares(const float* grads, int64_t n) override;
  absl::Status Step(float* params, const float* grads, int64_t n,
                    const optim::StepContext& ctx) override;

  // Copies the host optimizer's state to the device (after a restore).
  absl::Status LoadState() override;
  // Copies the device state into the host optimizer's buffers (before a
  // checkpoint or a host-side broadcast). Synchronous.
  absl::Status SaveState() override;

 private:
  CudaDeviceStepper(cuda::CudaBackend* backend, optim::Optimizer* host_optimizer);

  cuda::CudaBackend* const backend_;
  optim::Optimizer* const host_;
  std::vector<float*> state_;  // device, one per host StateBuffer
  float* scratch_ = nullptr;   // one device float for the norm
};

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_CUDA_CUDA_DEVICE_STEPPER_H_
