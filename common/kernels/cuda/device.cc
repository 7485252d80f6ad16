#include "common/kernels/cuda/device.h"

#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kernels/cuda/cuda_status.h"

namespace tandem {
namespace cuda {

absl::StatusOr<int> DeviceCount() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // Clear the sticky "last error" so later calls are not confused by it.
    cudaGetLastError();
    absl::Status status = CudaStatus(error, "cudaGetDeviceCount");
    return absl::UnavailableError(status.message());
  }
  return count;
}

bool HasDevice() {
  absl::StatusOr<int> count = DeviceCount();
  return count.ok() && *count > 0;
}

absl::StatusOr<DeviceInfo> ProbeDevice(int ordinal) {
  ASSIGN_OR_RETURN(int count, DeviceCount());
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ", ordinal, " does not exist; ", count, " visible"));
  }
  cudaDeviceProp prop;
  RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&prop, ordinal),
                       absl::StrCat("cudaGetDeviceProperties(", ordinal, ")"));
  RETURN_IF_CUDA_ERROR(cudaSetDevice(ordinal),
                       absl::StrCat("cudaSetDevice(", ordinal, ")"));
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_CUDA_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes),
                       "cudaMemGetInfo");
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.compute_capability_major = prop.major;
  info.compute_capability_minor = prop.minor;
  info.total_memory_bytes = static_cast<int64_t>(total_bytes);
  info.free_memory_bytes = static_cast<int64_t>(free_bytes);
  return info;
}

std::string DescribeDevice(const DeviceInfo& info) {
  return absl::StrFormat("%s (sm_%d%d, %d SMs, %.1f GiB)", info.name,
                         info.compute_capability_major,
                         info.compute_capability_minor, info.sm_count,
                         info.total_memory_bytes / 1073741824.0);
}

}  // namespace cuda
}  // namespace tandem
