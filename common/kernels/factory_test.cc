#include "common/kernels/factory.h"

#include "common/kernels/cpu_backend.h"
#include "gtest/gtest.h"

namespace tandem {
namespace kernels {
namespace {

TEST(FactoryTest, CpuByName) {
  BackendOptions options;
  options.device = "cpu";
  absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend(options);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_STREQ((*b)->name(), "cpu");
  EXPECT_TRUE((*b)->host_accessible());
}

TEST(FactoryTest, UnlinkedBackendFallsBackOrFails) {
  BackendOptions options;
  options.device = "no-such-device";
  absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend(options);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_STREQ((*b)->name(), "cpu");

  options.allow_cpu_fallback = false;
  b = CreateBackend(options);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(b.status().message().find("no-such-device"), std::string::npos);
}

TEST(FactoryTest, RegisteredFactoryIsUsedAndUnavailableFallsBack) {
  int calls = 0;
  RegisterBackendFactory("fake", [&calls](const BackendOptions& o)
                                     -> absl::StatusOr<std::unique_ptr<Backend>> {
    ++calls;
    if (o.cuda_device != 0) return absl::UnavailableError("no device");
    if (o.cpu_threads == 7) return absl::InternalError("broken driver");
    return std::unique_ptr<Backend>(new CpuBackend(o));
  });
  BackendOptions options;
  options.device = "fake";
  ASSERT_TRUE(CreateBackend(options).ok());
  EXPECT_EQ(calls, 1);

  options.cuda_device = 3;  // factory says unavailable -> cpu
  absl::StatusOr<std::unique_ptr<Backend>> b = CreateBackend(options);
  ASSERT_TRUE(b.ok());
  EXPECT_STREQ((*b)->name(), "cpu");
  options.allow_cpu_fallback = false;
  EXPECT_EQ(CreateBackend(options).status().code(),
            absl::StatusCode::kUnavailable);

  // Other errors are never hidden by the fallback.
  options.cuda_device = 0;
  options.cpu_threads = 7;
  options.allow_cpu_fallback = true;
  EXPECT_EQ(CreateBackend(options).status().code(),
            absl::StatusCode::kInternal);
  std::vector<std::string> names = RegisteredBackendNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "fake"), names.end());
}

TEST(DeviceBufferTest, AllocateMoveAndFree) {
  CpuBackend backend;
  absl::StatusOr<DeviceBuffer> buf = backend.Allocate(100);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->bytes(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % 64, 0u);
  DeviceBuffer moved = std::move(*buf);
  EXPECT_TRUE(buf->empty());
  EXPECT_FALSE(moved.empty());
  moved.Reset();
  EXPECT_TRUE(moved.empty());
  absl::StatusOr<DeviceBuffer> zero = backend.Allocate(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->empty());
}

}  // namespace
}  // namespace kernels
}  // namespace tandem
