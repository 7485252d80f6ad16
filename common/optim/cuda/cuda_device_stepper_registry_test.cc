// Linking :cuda_device_stepper registers the "cuda" stepper, so a device
// backend named "cuda" gets a real factory (no device needed: the factory
// is not called). Runs in CUDA builds without a GPU.
#include <algorithm>
#include <string>
#include <vector>

#include "common/kernels/cuda/cuda_backend.h"
#include "common/optim/device_stepper_registry.h"
#include "gtest/gtest.h"

namespace tandem {
namespace optim {
namespace {

TEST(CudaDeviceStepperRegistry, CudaIsRegistered) {
  const std::vector<std::string> names = RegisteredDeviceSteppers();
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());
}

}  // namespace
}  // namespace optim
}  // namespace tandem
