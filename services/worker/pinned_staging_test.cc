// Pinned checkpoint staging (issue 34 item 4). On a CPU-only machine
// MakePinnedStaging refuses with UNAVAILABLE (the checkpointer keeps
// pageable staging) and the GPU part is skipped; with a GPU the buffer is
// page-locked host memory (cudaPointerGetAttributes), reused while it is
// large enough, and a device-to-host copy into it returns the values.
#include "services/worker/pinned_staging.h"

#include <cuda_runtime.h>

#include <vector>

#include "common/kernels/cuda/device.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

TEST(PinnedStaging, PageableStagingGrowsAndKeepsItsBuffer) {
  std::unique_ptr<HostStaging> s = MakePageableStaging();
  EXPECT_FALSE(s->pinned());
  absl::StatusOr<float*> a = s->Reserve(100);
  ASSERT_TRUE(a.ok());
  (*a)[99] = 7.f;
  absl::StatusOr<float*> b = s->Reserve(50);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ((*b)[99], 7.f);
  EXPECT_EQ(s->capacity(), 100);
}

TEST(PinnedStaging, DeviceToHostIntoPageLockedMemory) {
  absl::StatusOr<std::unique_ptr<HostStaging>> s = MakePinnedStaging();
  if (!cuda::HasDevice()) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
    GTEST_SKIP() << "no CUDA device: " << s.status();
  }
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->pinned());
  constexpr int64_t kN = 1 << 20;
  absl::StatusOr<float*> host = (*s)->Reserve(kN);
  ASSERT_TRUE(host.ok()) << host.status();
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, *host), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  std::vector<float> want(kN);
  for (int64_t i = 0; i < kN; ++i) want[i] = static_cast<float>(i % 1000) * 0.5f;
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, want.data(), kN * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(*host, device, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(device);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ((*host)[i], want[i]) << i;
  absl::StatusOr<float*> again = (*s)->Reserve(kN / 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *host);  // reused, not reallocated
}

}  // namespace
}  // namespace worker
}  // namespace tandem
