// Runs on every machine with the CUDA toolkit: checks that linking
// //common/kernels/cuda:cuda_backend registers "cuda", and that
// CreateBackend falls back to the CPU (or fails cleanly) without a device.
#include <memory>

#include "common/kernels/backend.h"
#include "common/kernels/cuda/device.h"
#include "common/kernels/factory.h"
#include "gtest/gtest.h"

namespace tandem {
namespace kernels {
namespace {

TEST(CudaBackendFactoryTest, LinkingRegistersCuda) {
  EXPECT_NE(FindBackendFactory("cuda"), nullptr);
}

TEST(CudaBackendFactoryTest, CudaWhenPresentCpuOtherwise) {
  BackendOptions options;
  options.device = "cuda";
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  if (cuda::HasDevice()) {
    EXPECT_STREQ((*backend)->name(), "cuda");
    EXPECT_FALSE((*backend)->host_accessible());
  } else {
    EXPECT_STREQ((*backend)->name(), "cpu");
  }
}

TEST(CudaBackendFactoryTest, NoFallbackWithoutDeviceIsUnavailable) {
  if (cuda::HasDevice()) GTEST_SKIP() << "a device is present";
  BackendOptions options;
  options.device = "cuda";
  options.allow_cpu_fallback = false;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(absl::IsUnavailable(backend.status())) << backend.status();
}

TEST(CudaBackendFactoryTest, BadOrdinalIsInvalidArgument) {
  if (!cuda::HasDevice()) GTEST_SKIP() << "needs a device";
  BackendOptions options;
  options.device = "cuda";
  options.cuda_device = 4096;
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(options);
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(backend.status())) << backend.status();
}

}  // namespace
}  // namespace kernels
}  // namespace tandem
