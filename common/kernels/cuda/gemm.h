// cuBLAS GEMMs for row-major matrices: fp32 (optionally on TF32 or bf16
// tensor cores with fp32 in/out), and bf16 storage with fp32 accumulation
// (mixed precision), each also strided-batched for attention.
//
// Row-major through the column-major trick: C = op(A) op(B) in row-major is
// C^T = op(B)^T op(A)^T in column-major, and a row-major matrix *is* its
// transpose in column-major with the same leading dimension, so we call
// cuBLAS with A and B swapped and m and n swapped; the transpose flags pass
// through unchanged.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CublasGemm> gemm,
//                    CublasGemm::Create(stream));
//   RETURN_IF_ERROR(gemm->Gemm(GemmMath::kFp32, false, true, m, n, k, 1.f,
//                              x, k, w, k, 0.f, y, n));
//
// The handle and a 32 MiB cuBLAS workspace are created once, bound to one
// stream; calls only enqueue work. Thread-compatible (one thread at a time).
// Failures are cuBLAS statuses converted once, naming the call and shape.
#ifndef TANDEM_COMMON_KERNELS_CUDA_GEMM_H_
#define TANDEM_COMMON_KERNELS_CUDA_GEMM_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {
namespace cuda {

// How an fp32 GEMM multiplies. Accumulation is fp32 in every mode.
enum class GemmMath {
  kFp32,  // plain fp32 (CUDA cores), the reference
  kTf32,  // fp32 in/out, TF32 tensor-core products
  kBf16,  // fp32 in/out, bf16 tensor-core products
};

class CublasGemm {
 public:
  // Creates a handle bound to `stream` on the current device.
  static absl::StatusOr<std::unique_ptr<CublasGemm>> Create(
      cudaStream_t stream);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // C[m,n] = alpha op(A) op(B) + beta C, row-major; A stored [m,k] (or [k,m]
  // when trans_a), B stored [k,n] (or [n,k] when trans_b).
  absl::Status Gemm(GemmMath math, bool trans_a, bool trans_b, int m, int n,
                    int k, float alpha, const float* a, int lda,
                    const float* b, int ldb, float beta, float* c, int ldc);
  absl::Status GemmStridedBatched(GemmMath math, bool trans_a, bool trans_b,
                                  int m, int n, int k, float alpha,
                                  const float* a, int lda, int64_t stride_a,
                                  const float* b, int ldb, int64_t stride_b,
                                  float beta, float* c, int ldc,
                                  int64_t stride_c, int batch);

  // Mixed precision: A and B are bf16 (stored as uint16_t), accumulation is
  // fp32 (CUBLAS_COMPUTE_32F); C is fp32, or bf16 when c_bf16 is true.
  absl::Status GemmBf16(bool trans_a, bool trans_b, int m, int n, int k,
                        float alpha, const uint16_t* a, int lda,
                        const uint16_t* b, int ldb, float beta, void* c,
                        bool c_bf16, int ldc);
  absl::Status GemmBf16StridedBatched(bool trans_a, bool trans_b, int m, int n,
                                      int k, float alpha, const uint16_t* a,
                                      int lda, int64_t stride_a,
                                      const uint16_t* b, int ldb,
                                      int64_t stride_b, float beta, void* c,
                                      bool c_bf16, int ldc, int64_t stride_c,
                                      int batch);

  cublasHandle_t handle() const { return handle_; }

 private:
  CublasGemm(cublasHandle_t handle, void* workspace)
      : handle_(handle), workspace_(workspace) {}

  cublasHandle_t handle_;
  void* workspace_;  // owned; cudaFree'd in the destructor
};

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_GEMM_H_
