#include "common/kernels/cuda/cuda_status.h"

#include "gtest/gtest.h"

namespace tandem {
namespace cuda {
namespace {

TEST(CudaStatusTest, SuccessIsOk) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  EXPECT_TRUE(CublasStatus(CUBLAS_STATUS_SUCCESS, "x").ok());
}

TEST(CudaStatusTest, MapsCodesAndNamesTheOperation) {
  absl::Status oom = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc of w");
  EXPECT_TRUE(absl::IsResourceExhausted(oom)) << oom;
  EXPECT_NE(oom.message().find("cudaMalloc of w"), absl::string_view::npos);
  EXPECT_NE(oom.message().find("cudaErrorMemoryAllocation"),
            absl::string_view::npos)
      << oom;

  EXPECT_TRUE(absl::IsUnavailable(CudaStatus(cudaErrorNoDevice, "probe")));
  EXPECT_TRUE(
      absl::IsUnavailable(CudaStatus(cudaErrorInsufficientDriver, "probe")));
  EXPECT_TRUE(
      absl::IsInvalidArgument(CudaStatus(cudaErrorInvalidValue, "memcpy")));
  EXPECT_TRUE(absl::IsInternal(CudaStatus(cudaErrorLaunchFailure, "kernel")));
}

TEST(CudaStatusTest, MapsCublasCodes) {
  absl::Status s = CublasStatus(CUBLAS_STATUS_INVALID_VALUE, "sgemm m=3");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("sgemm m=3"), absl::string_view::npos);
  EXPECT_NE(s.message().find("CUBLAS_STATUS_INVALID_VALUE"),
            absl::string_view::npos)
      << s;
  EXPECT_TRUE(absl::IsResourceExhausted(
      CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "create")));
  EXPECT_TRUE(absl::IsInternal(
      CublasStatus(CUBLAS_STATUS_EXECUTION_FAILED, "gemm")));
}

absl::Status Twice(int* calls) {
  ++*calls;
  RETURN_IF_CUDA_ERROR(cudaErrorInvalidValue, "first");
  ++*calls;
  return absl::OkStatus();
}

TEST(CudaStatusTest, MacroReturnsEarly) {
  int calls = 0;
  absl::Status s = Twice(&calls);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
