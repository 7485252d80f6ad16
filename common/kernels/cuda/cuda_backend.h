// CudaBackend: the Backend (common/kernels/backend.h) on one NVIDIA GPU.
// GEMMs go to cuBLAS (gemm.h); everything else to the kernels in
// *_kernels.h. All work is enqueued on one CUDA stream the backend owns, so
// kernels run in call order and the host never waits except in Synchronize()
// and CopyToHost.
//
// CopyToDevice stages the host bytes through a pinned ring (two 8 MiB slots,
// larger copies go chunk by chunk) and enqueues the DMA on the stream without
// waiting for it: when it returns, the caller's buffer may be reused (the
// Backend contract), while the device may still be busy with earlier kernels
// and the copy; the host is then free to prepare the next batch, so the
// transfer overlaps with compute instead of draining the stream every time.
// A slot is reused only after the event recorded behind its last copy.
//
// Linking //common/kernels/cuda:cuda_backend registers the factory "cuda"
// with RegisterBackendFactory, so CreateBackend({.device = "cuda"}) returns a
// CudaBackend when a device is present and falls back to the CPU otherwise
// (see factory.h). Create() returns UnavailableError without a device.
//
// No allocation after construction: the stream, the cuBLAS handle with its
// workspace, the reduction scratch (per-block partials of the deterministic
// SumSquares) and the pinned staging ring are made once; the per-call kernels
// only read and write caller memory.
//
// Thread-compatible (one thread at a time, like every Backend). Errors from
// enqueued work are kept (the first one) and returned by the next
// Synchronize() or copy, as the interface specifies; the kernel calls
// themselves never block or abort. An asynchronous fault (e.g. an illegal
// address) surfaces at a later CUDA call, so by default its message names the
// operation where it was seen "or an earlier one"; with
// set_check_each_call(true) (tests, benchmark warm-ups) every operation is
// followed by a stream synchronisation and an error is named where it arose.
#ifndef TANDEM_COMMON_KERNELS_CUDA_CUDA_BACKEND_H_
#define TANDEM_COMMON_KERNELS_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/kernels/backend.h"
#include "common/kernels/cuda/gemm.h"

namespace tandem {
namespace cuda {

class CudaBackend final : public kernels::Backend {
 public:
  // UnavailableError when no device is present; other errors for a bad
  // ordinal or a failed stream / cuBLAS set-up.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      const kernels::BackendOptions& options);
  ~CudaBackend() override;

  const char* name() const override { return "cuda"; }
  bool host_accessible() const override { return false; }
  absl::Status Synchronize() override;
  void* native_stream() override { return stream_; }

  absl::StatusOr<void*> AllocateRaw(size_t bytes) override;
  void Free(void* ptr) override;
  absl::Status CopyToDevice(void* dst, const void* host_src,
                            size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src,
                          size_t bytes) override;
  void Copy(void* dst, const void* src, size_t bytes) override;
  void Fill(float* x, int64_t n, float value) override;

  void Gemm(kernels::Transpose ta, kernels::Transpose tb, int m, int n, int k,
            float alpha, const float* a, int lda, const float* b, int ldb,
            float beta, float* c, int ldc) override;
  void GemmStridedBatched(kernels::Transpose ta, kernels::Transpose tb, int m,
                          int n, int k, float alpha, const float* a, int lda,
                          int64_t stride_a, const float* b, int ldb,
                          int64_t stride_b, float beta, float* c, int ldc,
                          int64_t stride_c, int batch) override;

  void BiasActivationForward(kernels::Activation act, int rows, int cols,
                             const float* bias, float* z, float* y) override;
  void BiasActivationBackward(kernels::Activation act, int rows, int cols,
                              const float* z, const float* dy, float* dz,
                              float* dbias, float dbias_beta) override;
  void BiasActivationForwardKeepGrad(kernels::Activation act, int rows,
                                     int cols, const float* bias, float* z,
                                     float* y) override;
  void BiasActivationBackwardFromGrad(int rows, int cols,
                                      const float* act_grad, const float* dy,
                                      float* dz, float* dbias,
                                      float dbias_beta) override;
  void ActivationForward(kernels::Activation act, int64_t n, const float* x,
                         float* y) override;
  void ActivationBackward(kernels::Activation act, int64_t n, const float* x,
                          const float* dy, float* dx) override;
  void BiasGrad(int rows, int cols, const float* dy, float beta,
                float* dbias) override;

  void LayerNormForward(int rows, int cols, float eps, const float* x,
                        const float* gamma, const float* beta_param, float* y,
                        float* mean, float* rstd) override;
  void LayerNormBackward(int rows, int cols, const float* x,
                         const float* gamma, const float* mean,
                         const float* rstd, const float* dy, float* dx,
                         float* dgamma, float* dbeta_param,
                         float grad_beta) override;

  void SoftmaxCrossEntropyForward(int rows, int classes, const float* logits,
                                  const int32_t* labels, float scale,
                                  float* probs, float* loss) override;
  void SoftmaxCrossEntropyBackward(int rows, int classes, const float* probs,
                                   const int32_t* labels, float scale,
                                   float* dlogits) override;
  void ArgmaxRows(int rows, int cols, const float* x, int32_t* out) override;

  void EmbeddingForward(int batch, int seq, int dim, const int32_t* ids,
                        const float* token_table, const float* pos_table,
                        float* out) override;
  void EmbeddingBackward(int batch, int seq, int dim, const int32_t* ids,
                         const float* dout, float* dtoken,
                         float* dpos) override;

  void SplitHeads(int batch, int seq, int n, int heads, int head_dim,
                  const float* x, float* out) override;
  void MergeHeads(int batch, int seq, int n, int heads, int head_dim,
                  const float* x, float* out) override;
  void CausalSoftmaxForward(int batch, int seq, float scale,
                            const float* scores, float* probs) override;
  void CausalSoftmaxBackward(int batch, int seq, float scale,
                             const float* probs, const float* dprobs,
                             float* dscores) override;

  void Axpy(int64_t n, float alpha, const float* x, float* y) override;
  void Add(int64_t n, const float* a, const float* b, float* out) override;
  void Scale(int64_t n, float alpha, float* x) override;
  void SumSquares(int64_t n, const float* x, float* result) override;
  void CountNonFinite(int64_t n, const float* x, float* result) override;

  void CastF32ToBf16(int64_t n, const float* x, uint16_t* y) override;
  void CastBf16ToF32(int64_t n, const uint16_t* x, float* y) override;
  void CastF32ToF16(int64_t n, const float* x, uint16_t* y) override;
  void CastF16ToF32(int64_t n, const uint16_t* x, float* y) override;

  // The stream all work is enqueued on (for events, NCCL, benchmarks).
  cudaStream_t stream() const { return stream_; }
  // Debugging / tests: synchronise after every operation so an asynchronous
  // error is attributed to the kernel that caused it (slow; off by default).
  void set_check_each_call(bool on) { check_each_call_ = on; }
  // Bytes of one pinned staging slot (CopyToDevice chunks by this).
  static constexpr size_t kStagingSlotBytes = size_t{8} << 20;
  static constexpr int kStagingSlots = 2;
  // cuBLAS wrapper, also for bf16-storage GEMMs outside the interface.
  CublasGemm& gemm() { return *gemm_; }

 private:
  struct Staging {
    void* pinned = nullptr;                // kStagingSlots * kStagingSlotBytes
    cudaEvent_t done[kStagingSlots] = {};  // recorded behind each slot's copy
  };
  CudaBackend(int device, cudaStream_t stream, GemmMath math,
              std::unique_ptr<CublasGemm> gemm, void* scratch, Staging staging);

  // Keeps the first error of an enqueued operation for Synchronize().
  void Note(cudaError_t error, const char* operation);
  void Note(const absl::Status& status);
  // The kept error (clearing it), or OK.
  absl::Status TakePending();

  int device_;
  cudaStream_t stream_;
  GemmMath math_;
  std::unique_ptr<CublasGemm> gemm_;
  void* scratch_;  // SumSquares partials / the CountNonFinite accumulator
  Staging staging_;
  int next_slot_ = 0;
  bool check_each_call_ = false;
  absl::Status pending_;
};

// The factory registered as "cuda": CudaBackend::Create as a Backend.
absl::StatusOr<std::unique_ptr<kernels::Backend>> CreateCudaBackend(
    const kernels::BackendOptions& options);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_CUDA_BACKEND_H_
