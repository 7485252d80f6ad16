// Which DeviceStepper a backend uses, chosen by the backend's name so that
// strategies and the trainer never name a device library. A device library
// registers its stepper from an alwayslink target (cuda_device_stepper.cc
// registers "cuda"); a binary links the ones it needs.
//
//   SyncEnv env;
//   env.make_device_stepper = DeviceStepperFactoryFor(backend);  // empty on CPU
//   // the strategy: if (env.make_device_stepper) stepper = env.make_device_stepper(opt)
//
// DeviceStepperFactoryFor returns an empty function for a host-accessible
// backend (the host optimizer steps host memory). For a device backend with
// no registered stepper it returns a factory whose call is UNIMPLEMENTED,
// naming the backend and the registered ones, so the error surfaces when
// the strategy is built rather than as a crash on device pointers.
// Thread-safety: registration during static initialisation; lookups are
// safe concurrently afterwards. A second registration of a name aborts.
#ifndef TANDEM_COMMON_OPTIM_DEVICE_STEPPER_REGISTRY_H_
#define TANDEM_COMMON_OPTIM_DEVICE_STEPPER_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kernels/backend.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace optim {

// Builds the stepper for `backend` (borrowed, outlives the stepper)
// mirroring `host_optimizer` (borrowed).
using BackendDeviceStepperCreator = std::function<absl::StatusOr<std::unique_ptr<DeviceStepper>>(
    kernels::Backend* backend, optim::Optimizer* host_optimizer)>;

// `backend_name` is kernels::Backend::name() ("cuda"). Returns true so it can
// initialise a static.
bool RegisterDeviceStepper(const std::string& backend_name, BackendDeviceStepperCreator creator);

// Backend names with a registered stepper, sorted.
std::vector<std::string> RegisteredDeviceSteppers();

// The factory for `backend` (borrowed; it must outlive the factory and what
// it builds). Empty when backend is null or host_accessible().
DeviceStepperFactory DeviceStepperFactoryFor(kernels::Backend* backend);

}  // namespace optim
}  // namespace tandem

#endif  // TANDEM_COMMON_OPTIM_DEVICE_STEPPER_REGISTRY_H_
