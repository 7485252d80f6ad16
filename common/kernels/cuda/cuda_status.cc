#include "common/kernels/cuda/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace tandem {
namespace cuda {

absl::Status CudaStatus(cudaError_t error, absl::string_view operation) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message =
      absl::StrCat(operation, ": CUDA error ", cudaGetErrorName(error), " (",
                   static_cast<int>(error), "): ", cudaGetErrorString(error));
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(
          absl::StrCat(message, "; use a smaller batch or model"));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::UnavailableError(absl::StrCat(
          message, "; check that a GPU and its driver are present, or use "
                   "the cpu backend"));
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidConfiguration:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CublasStatus(cublasStatus_t status, absl::string_view operation) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  std::string message =
      absl::StrCat(operation, ": cuBLAS error ", cublasGetStatusName(status),
                   " (", static_cast<int>(status),
                   "): ", cublasGetStatusString(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return absl::UnavailableError(message);
    case CUBLAS_STATUS_INVALID_VALUE:
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace cuda
}  // namespace tandem
