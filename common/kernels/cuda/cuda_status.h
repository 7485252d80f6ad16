// Turns CUDA runtime and cuBLAS error codes into absl::Status, once, at the
// boundary of the CUDA backend. Nothing above common/kernels/cuda sees a
// cudaError_t or cublasStatus_t.
//
//   RETURN_IF_CUDA_ERROR(cudaMalloc(&p, n), "cudaMalloc of the workspace");
//   RETURN_IF_CUBLAS_ERROR(cublasCreate(&h), "cublasCreate");
//
// The message names the operation, the library's error name and its text,
// e.g. "cudaMalloc of the workspace: CUDA error cudaErrorMemoryAllocation
// (2): out of memory". Codes map to absl codes so callers can react:
// out of memory -> kResourceExhausted, no device / no driver ->
// kUnavailable, invalid argument -> kInvalidArgument, anything else ->
// kInternal. Thread-safe (pure functions).
#ifndef TANDEM_COMMON_KERNELS_CUDA_CUDA_STATUS_H_
#define TANDEM_COMMON_KERNELS_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace cuda {

// OK for cudaSuccess; otherwise a Status naming `operation`.
absl::Status CudaStatus(cudaError_t error, absl::string_view operation);

// OK for CUBLAS_STATUS_SUCCESS; otherwise a Status naming `operation`.
absl::Status CublasStatus(cublasStatus_t status, absl::string_view operation);

}  // namespace cuda
}  // namespace tandem

#define RETURN_IF_CUDA_ERROR(expr, operation) \
  RETURN_IF_ERROR(::tandem::cuda::CudaStatus((expr), (operation)))

#define RETURN_IF_CUBLAS_ERROR(expr, operation) \
  RETURN_IF_ERROR(::tandem::cuda::CublasStatus((expr), (operation)))

#endif  // TANDEM_COMMON_KERNELS_CUDA_CUDA_STATUS_H_
