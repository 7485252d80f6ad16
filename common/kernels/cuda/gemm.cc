#include "common/kernels/cuda/gemm.h"

#include <cuda_bf16.h>

#include "absl/strings/str_cat.h"
#include "common/kernels/cuda/cuda_status.h"

namespace tandem {
namespace cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS' Hopper advice

cublasOperation_t Op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

cublasComputeType_t ComputeType(GemmMath math) {
  switch (math) {
    case GemmMath::kTf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case GemmMath::kBf16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
    default:
      return CUBLAS_COMPUTE_32F;
  }
}

// Only built when a call fails, so the hot path formats nothing.
absl::Status GemmError(cublasStatus_t status, const char* call, int m, int n,
                       int k, int batch) {
  return CublasStatus(status, absl::StrCat(call, " m=", m, " n=", n, " k=", k,
                                           " batch=", batch));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CublasGemm>> CublasGemm::Create(
    cudaStream_t stream) {
  cublasHandle_t handle = nullptr;
  RETURN_IF_CUBLAS_ERROR(cublasCreate(&handle), "cublasCreate");
  void* workspace = nullptr;
  absl::Status status =
      CudaStatus(cudaMalloc(&workspace, kWorkspaceBytes),
                 "cudaMalloc of the 32 MiB cuBLAS workspace");
  if (status.ok()) {
    status = CublasStatus(cublasSetStream(handle, stream), "cublasSetStream");
  }
  if (status.ok()) {
    status = CublasStatus(
        cublasSetWorkspace(handle, workspace, kWorkspaceBytes),
        "cublasSetWorkspace");
  }
  if (!status.ok()) {
    cublasDestroy(handle);
    if (workspace != nullptr) cudaFree(workspace);
    return status;
  }
  return std::unique_ptr<CublasGemm>(new CublasGemm(handle, workspace));
}

CublasGemm::~CublasGemm() {
  cublasDestroy(handle_);
  cudaFree(workspace_);
}

absl::Status CublasGemm::Gemm(GemmMath math, bool trans_a, bool trans_b,
                              int m, int n, int k, float alpha, const float* a,
                              int lda, const float* b, int ldb, float beta,
                              float* c, int ldc) {
  cublasStatus_t s;
  if (math == GemmMath::kFp32) {
    s = cublasSgemm(handle_, Op(trans_b), Op(trans_a), n, m, k, &alpha, b, ldb,
                    a, lda, &beta, c, ldc);
  } else {
    s = cublasGemmEx(handle_, Op(trans_b), Op(trans_a), n, m, k, &alpha, b,
                     CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F,
                     ldc, ComputeType(math), CUBLAS_GEMM_DEFAULT);
  }
  if (s != CUBLAS_STATUS_SUCCESS) return GemmError(s, "cublas gemm", m, n, k, 1);
  return absl::OkStatus();
}

absl::Status CublasGemm::GemmStridedBatched(
    GemmMath math, bool trans_a, bool trans_b, int m, int n, int k,
    float alpha, const float* a, int lda, int64_t stride_a, const float* b,
    int ldb, int64_t stride_b, float beta, float* c, int ldc, int64_t stride_c,
    int batch) {
  cublasStatus_t s;
  if (math == GemmMath::kFp32) {
    s = cublasSgemmStridedBatched(handle_, Op(trans_b), Op(trans_a), n, m, k,
                                  &alpha, b, ldb, stride_b, a, lda, stride_a,
                                  &beta, c, ldc, stride_c, batch);
  } else {
    s = cublasGemmStridedBatchedEx(
        handle_, Op(trans_b), Op(trans_a), n, m, k, &alpha, b, CUDA_R_32F, ldb,
        stride_b, a, CUDA_R_32F, lda, stride_a, &beta, c, CUDA_R_32F, ldc,
        stride_c, batch, ComputeType(math), CUBLAS_GEMM_DEFAULT);
  }
  if (s != CUBLAS_STATUS_SUCCESS) {
    return GemmError(s, "cublas strided-batched gemm", m, n, k, batch);
  }
  return absl::OkStatus();
}

absl::Status CublasGemm::GemmBf16(bool trans_a, bool trans_b, int m, int n,
                                  int k, float alpha, const uint16_t* a,
                                  int lda, const uint16_t* b, int ldb,
                                  float beta, void* c, bool c_bf16, int ldc) {
  cublasStatus_t s = cublasGemmEx(
      handle_, Op(trans_b), Op(trans_a), n, m, k, &alpha, b, CUDA_R_16BF, ldb,
      a, CUDA_R_16BF, lda, &beta, c, c_bf16 ? CUDA_R_16BF : CUDA_R_32F, ldc,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return GemmError(s, "cublasGemmEx bf16", m, n, k, 1);
  }
  return absl::OkStatus();
}

absl::Status CublasGemm::GemmBf16StridedBatched(
    bool trans_a, bool trans_b, int m, int n, int k, float alpha,
    const uint16_t* a, int lda, int64_t stride_a, const uint16_t* b, int ldb,
    int64_t stride_b, float beta, void* c, bool c_bf16, int ldc,
    int64_t stride_c, int batch) {
  cublasStatus_t s = cublasGemmStridedBatchedEx(
      handle_, Op(trans_b), Op(trans_a), n, m, k, &alpha, b, CUDA_R_16BF, ldb,
      stride_b, a, CUDA_R_16BF, lda, stride_a, &beta, c,
      c_bf16 ? CUDA_R_16BF : CUDA_R_32F, ldc, stride_c, batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return GemmError(s, "cublasGemmStridedBatchedEx bf16", m, n, k, batch);
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace tandem
