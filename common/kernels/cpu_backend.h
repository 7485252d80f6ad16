// CpuBackend: the Backend on the host. GEMMs go to OpenBLAS cblas_sgemm,
// except a batch of <= 128 rows times a large weight (Y = X W^T, dX = dY W),
// which runs kernels that do not pack the weight (cpu_small_m_gemm.h);
// everything else is plain loops written so the compiler vectorises them
// (contiguous inner loops, no aliasing surprises, -O3). The bias / ReLU
// passes of the MLP's training step are also compiled for AVX2+FMA and
// picked per CPU at first use (the build itself targets x86-64-v2).
// The implementation is split by concept: cpu_backend.cc (memory, GEMM,
// embedding, vector ops, casts), cpu_activation.cc, cpu_layer_norm.cc,
// cpu_attention.cc, cpu_causal_gemm.cc and cpu_loss.cc, sharing
// cpu_vector_math.h.
//
// Device memory is host memory (64-byte aligned), so copies are memcpy and
// Synchronize() has nothing to wait for. Thread-compatible, like every
// Backend. Constructing one sets OpenBLAS's thread count process-wide
// (options.cpu_threads, default 1) because OpenBLAS has no per-call setting.
#ifndef TANDEM_COMMON_KERNELS_CPU_BACKEND_H_
#define TANDEM_COMMON_KERNELS_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "common/kernels/backend.h"

namespace tandem {
namespace kernels {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options = BackendOptions());

  const char* name() const override { return "cpu"; }
  bool host_accessible() const override { return true; }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::StatusOr<void*> AllocateRaw(size_t bytes) override;
  void Free(void* ptr) override;
  absl::Status CopyToDevice(void* dst, const void* host_src,
                            size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src,
                          size_t bytes) override;
  void Copy(void* dst, const void* src, size_t bytes) override;
  void Fill(float* x, int64_t n, float value) override;

  void Gemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha,
            const float* a, int lda, const float* b, int ldb, float beta,
            float* c, int ldc) override;
  void GemmStridedBatched(Transpose ta, Transpose tb, int m, int n, int k,
                          float alpha, const float* a, int lda,
                          int64_t stride_a, const float* b, int ldb,
                          int64_t stride_b, float beta, float* c, int ldc,
                          int64_t stride_c, int batch) override;

  void BiasActivationForward(Activation act, int rows, int cols,
                             const float* bias, float* z, float* y) override;
  void BiasActivationBackward(Activation act, int rows, int cols,
                              const float* z, const float* dy, float* dz,
                              float* dbias, float dbias_beta) override;
  void BiasActivationForwardKeepGrad(Activation act, int rows, int cols,
                                     const float* bias, float* z,
                                     float* y) override;
  void BiasActivationBackwardFromGrad(int rows, int cols,
                                      const float* act_grad, const float* dy,
                                      float* dz, float* dbias,
                                      float dbias_beta) override;
  void ActivationForward(Activation act, int64_t n, const float* x,
                         float* y) override;
  void ActivationBackward(Activation act, int64_t n, const float* x,
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

  // AVX-512 only (cpu_causal_gemm.cc): register-tiled, skips the masked
  // half at 64-column granularity, packs nothing but one [D, 64] panel.
  bool CausalGemmStridedBatched(CausalGemm kind, int seq, int head_dim, float alpha,
                                const float* a, int lda, int64_t stride_a, const float* b, int ldb,
                                int64_t stride_b, float* c, int ldc, int64_t stride_c,
                                int batch) override;
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

 private:
  // The small-M GEMMs' packed operand (cpu_small_m_gemm.h), kept so that
  // steady-state steps do not allocate.
  std::vector<float> small_m_scratch_;
};

// Factory signature for the registry (never fails).
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    const BackendOptions& options);

}  // namespace kernels
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CPU_BACKEND_H_
