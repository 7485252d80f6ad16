#include "tests/gpu/saxpy.h"

#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(CudaSmoke, SaxpyMatchesHost) {
  std::string why;
  if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  const int64_t n = 1000003;  // odd, several grid strides
  std::vector<float> x(n), y(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.5f;
    y[i] = static_cast<float>(i % 13) - 6.0f;
    want[i] = 3.0f * x[i] + y[i];
  }
  ASSERT_EQ(SaxpyOnDevice(3.0f, x.data(), y.data(), n), "");
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], want[i]) << "at " << i;
}

}  // namespace
}  // namespace tandem
