// DeviceStepper: the device-side finish of a step for params / grads in
// accelerator memory (CudaDeviceStepper in common/optim/cuda/cuda_device_stepper.h).
// A strategy given one computes the gradient norm and applies the update
// through it instead of reading the buffers on the host and calling the host
// optimizer; the scale and clip arithmetic (common/sync/grad_clip.h) stays on
// the host, identical to the CPU path. The host optimizer it mirrors is the
// host copy of the state for checkpoints: SaveState / LoadState move the
// state between the two.
//
// Thread-compatible: called only from the trainer thread, after every bucket
// is reduced. Errors: the launch or copy error as a Status.
#ifndef TANDEM_COMMON_OPTIM_DEVICE_STEPPER_H_
#define TANDEM_COMMON_OPTIM_DEVICE_STEPPER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace optim {

class DeviceStepper {
 public:
  virtual ~DeviceStepper() = default;
  // Sum of grads[i]^2 over [0, n) (device pointer), returned to the host.
  virtual absl::StatusOr<double> SumOfSquares(const float* grads, int64_t n) = 0;
  // One optimizer update of params[0, n) with grads[0, n) (device pointers);
  // ctx.grad_scale already holds average * clip factor. Returns once the
  // update is enqueued in order with later compute work.
  virtual absl::Status Step(float* params, const float* grads, int64_t n,
                            const optim::StepContext& ctx) = 0;
  // Host optimizer's state -> device (after a restore).
  virtual absl::Status LoadState() = 0;
  // Device state -> the host optimizer's buffers (before a checkpoint).
  virtual absl::Status SaveState() = 0;
};

// Builds the device finish mirroring `host_optimizer` (borrowed, outlives
// the stepper); nullptr-returning or empty for host-memory backends.
using DeviceStepperFactory = std::function<absl::StatusOr<std::unique_ptr<DeviceStepper>>(
    optim::Optimizer* host_optimizer)>;

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_DEVICE_STEPPER_H_
