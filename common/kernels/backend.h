// Backend: the compute operations tandem's layers need, behind one interface
// with a CPU implementation (OpenBLAS + vectorisable loops, cpu_backend.h) and
// a CUDA one (cuBLAS + custom kernels, common/kernels/cuda/), chosen at run
// time by CreateBackend() (factory.h).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, CreateBackend(options));
//   ASSIGN_OR_RETURN(DeviceBuffer w, be->Allocate(n * sizeof(float)));
//   RETURN_IF_ERROR(be->CopyToDevice(w.data(), host.data(), w.bytes()));
//   be->Gemm(Transpose::kNo, Transpose::kYes, m, n, k, 1.f, x, k, w.f32(), k,
//            0.f, y, n);
//   RETURN_IF_ERROR(be->Synchronize());
//
// Conventions for every kernel:
//  - Pointers are device memory this backend allocated (on the CPU backend,
//    ordinary host memory). fp32 unless the type says otherwise; labels and
//    token ids are int32. Matrices are row-major; every shape is explicit.
//  - Kernels return void and may run asynchronously (CUDA: in stream order on
//    the backend's stream). Shapes are validated by the caller (layers and
//    models return a Status for bad shapes before launching anything); a
//    kernel only DCHECKs. An error raised while a kernel ran (CUDA launch
//    failure, ...) is reported by the next Synchronize() or copy.
//  - Output arguments named `beta` follow BLAS: out = beta * out + result,
//    so beta = 0 overwrites (out may hold garbage) and beta = 1 accumulates
//    (gradient accumulation). Ops without a beta overwrite their output.
//  - Scalar results (losses, sums of squares) are written to a one-element
//    device buffer, so no kernel forces a host round trip.
//
// Thread-safety: thread-compatible. One Backend per worker thread; a Backend
// and the memory it allocated must be used from one thread at a time.
// Ownership: DeviceBuffer owns an allocation and frees it through the Backend
// that made it, so every DeviceBuffer must die before its Backend.
#ifndef TANDEM_COMMON_KERNELS_BACKEND_H_
#define TANDEM_COMMON_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {
namespace kernels {

class Backend;

enum class Transpose { kNo, kYes };

// The three shapes of causal attention's per-head GEMMs (seq T, head size D;
// A, B, C row-major with leading dimensions): see
// Backend::CausalGemmStridedBatched.
enum class CausalGemm {
  // C[i, j] = alpha sum_d A[i, d] B[j, d] for j <= i (A, B [T, D], C [T, T]):
  // the scores Q K^T and dP = dO V^T. C above the diagonal is unspecified.
  kScores,
  // C[i, :] = alpha sum_{j <= i} A[i, j] B[j, :] (A [T, T], B and C [T, D]):
  // O = P V and dQ = dS K. A above the diagonal is never read.
  kLowerTimes,
  // C[j, :] = alpha sum_{i >= j} A[i, j] B[i, :] (A [T, T], B and C [T, D]):
  // dV = P^T dO and dK = dS^T Q. A above the diagonal is never read.
  kLowerTransposedTimes,
};

// Element-wise activation applied after a bias add.
enum class Activation {
  kNone,  // identity
  kRelu,
  kGelu,  // tanh approximation (as GPT-2 / PyTorch approximate="tanh")
};

// Precision of GEMM inputs. Accumulation is always fp32. The CPU backend
// computes every mode in fp32; the CUDA backend uses tensor cores for kBf16
// (cuBLAS COMPUTE_32F_FAST_16BF: fp32 in and out, bf16 products) and kTf32.
enum class MathMode { kFp32, kTf32, kBf16 };

// Options for CreateBackend(). Defaults give a single-threaded CPU backend.
struct BackendOptions {
  // "cpu" or "cuda". "cuda" falls back to "cpu" (with a note on stderr) when
  // the CUDA backend is not linked in or no device is present, unless
  // allow_cpu_fallback is false.
  std::string device = "cpu";
  bool allow_cpu_fallback = true;
  // CPU: threads OpenBLAS may use (openblas_set_num_threads). One thread per
  // worker process is the default; data parallelism supplies the rest.
  int cpu_threads = 1;
  // CUDA: device ordinal.
  int cuda_device = 0;
  MathMode math_mode = MathMode::kFp32;
};

// An allocation made by a Backend; move-only RAII. Empty (data() == nullptr)
// when default-constructed or moved from.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* backend, void* data, size_t bytes)
      : backend_(backend), data_(data), bytes_(bytes) {}
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  int32_t* i32() const { return static_cast<int32_t*>(data_); }
  uint16_t* u16() const { return static_cast<uint16_t*>(data_); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return data_ == nullptr; }
  // Frees the allocation now.
  void Reset();

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual const char* name() const = 0;
  // True when pointers are host-addressable (the CPU backend).
  virtual bool host_accessible() const = 0;
  // Waits for all queued work; returns the first asynchronous error since the
  // previous call, if any.
  virtual absl::Status Synchronize() = 0;
  // Device backends: the stream (a cudaStream_t) all work is enqueued on, so
  // a communicator can order its collectives after the compute that wrote
  // its buffers (CommOptions::cuda_stream). nullptr for host backends, whose
  // kernels have finished when they return.
  virtual void* native_stream() { return nullptr; }

  // ---- Memory -------------------------------------------------------------
  // Allocates `bytes` (64-byte aligned at least). ResourceExhausted when out
  // of memory. Zero bytes gives an empty buffer.
  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  // Raw allocation behind Allocate(); pair with Free().
  virtual absl::StatusOr<void*> AllocateRaw(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Synchronous copies: when they return, `src` may be reused / `dst` read.
  virtual absl::Status CopyToDevice(void* dst, const void* host_src,
                                    size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src,
                                  size_t bytes) = 0;
  // Device-to-device copy (stream-ordered, may be asynchronous).
  virtual void Copy(void* dst, const void* src, size_t bytes) = 0;
  // x[0..n) = value.
  virtual void Fill(float* x, int64_t n, float value) = 0;

  // ---- GEMM ---------------------------------------------------------------
  // C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, row-major, with
  // leading dimensions lda/ldb/ldc counted in elements of the stored matrix
  // (A stored [m,k] when ta == kNo, [k,m] when kYes).
  virtual void Gemm(Transpose ta, Transpose tb, int m, int n, int k,
                    float alpha, const float* a, int lda, const float* b,
                    int ldb, float beta, float* c, int ldc) = 0;
  // `batch` independent GEMMs; matrix i starts at a + i*stride_a, etc.
  virtual void GemmStridedBatched(Transpose ta, Transpose tb, int m, int n,
                                  int k, float alpha, const float* a, int lda,
                                  int64_t stride_a, const float* b, int ldb,
                                  int64_t stride_b, float beta, float* c,
                                  int ldc, int64_t stride_c, int batch) = 0;

  // ---- Bias + activation (fused) -------------------------------------------
  // For a [rows, cols] matrix: z += bias (broadcast over rows, bias may be
  // null for no bias), then y = act(z). z keeps the pre-activation for the
  // backward pass; y may alias z when act == kNone.
  virtual void BiasActivationForward(Activation act, int rows, int cols,
                                     const float* bias, float* z,
                                     float* y) = 0;
  // dz = dy * act'(z) (dz may alias dy); if dbias is non-null,
  // dbias = dbias_beta * dbias + column sums of dz.
  virtual void BiasActivationBackward(Activation act, int rows, int cols,
                                      const float* z, const float* dy,
                                      float* dz, float* dbias,
                                      float dbias_beta) = 0;
  // The same forward keeping the activation's derivative instead of the
  // pre-activation: with v = z + bias, y = act(v) and z = act'(v), so the
  // backward pass is a multiply (BiasActivationBackwardFromGrad) instead of
  // a second evaluation of the activation (GELU: an exp and a division per
  // element). y must not alias z.
  virtual void BiasActivationForwardKeepGrad(Activation act, int rows, int cols,
                                             const float* bias, float* z,
                                             float* y) = 0;
  // dz = dy * act_grad (act_grad as BiasActivationForwardKeepGrad left it in
  // z; dz may alias dy); dbias as in BiasActivationBackward.
  virtual void BiasActivationBackwardFromGrad(int rows, int cols,
                                              const float* act_grad,
                                              const float* dy, float* dz,
                                              float* dbias,
                                              float dbias_beta) = 0;
  // Stand-alone activation on n elements: y = act(x) (y may alias x).
  virtual void ActivationForward(Activation act, int64_t n, const float* x,
                                 float* y) = 0;
  // dx = dy * act'(x) (dx may alias dy).
  virtual void ActivationBackward(Activation act, int64_t n, const float* x,
                                  const float* dy, float* dx) = 0;
  // dbias = beta * dbias + column sums of dy [rows, cols].
  virtual void BiasGrad(int rows, int cols, const float* dy, float beta,
                        float* dbias) = 0;

  // ---- LayerNorm over the last dimension ------------------------------------
  // y = (x - mean) * rstd * gamma + beta_param per row of [rows, cols];
  // saves mean[rows] and rstd[rows] for backward.
  virtual void LayerNormForward(int rows, int cols, float eps, const float* x,
                                const float* gamma, const float* beta_param,
                                float* y, float* mean, float* rstd) = 0;
  // Overwrites dx; dgamma/dbeta_param = grad_beta * old + this batch's sums.
  virtual void LayerNormBackward(int rows, int cols, const float* x,
                                 const float* gamma, const float* mean,
                                 const float* rstd, const float* dy, float* dx,
                                 float* dgamma, float* dbeta_param,
                                 float grad_beta) = 0;

  // ---- Softmax cross-entropy (fused) ---------------------------------------
  // Per row of logits [rows, classes]: probs = softmax(logits);
  // *loss = scale * sum over rows with label >= 0 of -log probs[label].
  // Rows with a negative label are ignored (padding). Labels must be
  // < classes. probs may alias logits.
  virtual void SoftmaxCrossEntropyForward(int rows, int classes,
                                          const float* logits,
                                          const int32_t* labels, float scale,
                                          float* probs, float* loss) = 0;
  // dlogits = scale * (probs - onehot(label)); zero rows for ignored labels.
  // dlogits may alias probs.
  virtual void SoftmaxCrossEntropyBackward(int rows, int classes,
                                           const float* probs,
                                           const int32_t* labels, float scale,
                                           float* dlogits) = 0;
  // out[r] = index of the largest x[r, :] (first on ties).
  virtual void ArgmaxRows(int rows, int cols, const float* x,
                          int32_t* out) = 0;

  // ---- Embedding -------------------------------------------------------------
  // out[b, t, :] = token_table[ids[b, t], :] + pos_table[t, :] for ids
  // [batch, seq]; pos_table may be null. ids must be in [0, vocab).
  virtual void EmbeddingForward(int batch, int seq, int dim,
                                const int32_t* ids, const float* token_table,
                                const float* pos_table, float* out) = 0;
  // Scatter-add: dtoken[ids[b,t], :] += dout[b, t, :]; if dpos is non-null,
  // dpos[t, :] += sum over b of dout[b, t, :]. Both accumulate (zero them
  // first for a fresh gradient).
  virtual void EmbeddingBackward(int batch, int seq, int dim,
                                 const int32_t* ids, const float* dout,
                                 float* dtoken, float* dpos) = 0;

  // ---- Attention pieces -------------------------------------------------------
  // `batch` causal GEMMs of one kind (see CausalGemm) on a kernel of the
  // backend's own, operand i at a + i * stride_a etc., C overwritten.
  // Returns false, having done nothing, where the backend has no such kernel
  // for these sizes (the default; the CPU backend's needs AVX-512 and a
  // head size that is a multiple of 16): the caller then runs the same
  // product as GemmStridedBatched calls.
  virtual bool CausalGemmStridedBatched(CausalGemm kind, int seq, int head_dim, float alpha,
                                        const float* a, int lda, int64_t stride_a,
                                        const float* b, int ldb, int64_t stride_b, float* c,
                                        int ldc, int64_t stride_c, int batch) {
    return false;
  }
  // x viewed as [batch, seq, n, heads, head_dim] -> out [n, batch, heads,
  // seq, head_dim]. With n = 3 this splits a fused QKV projection into
  // per-head Q, K, V; with n = 1 it undoes MergeHeads.
  virtual void SplitHeads(int batch, int seq, int n, int heads, int head_dim,
                          const float* x, float* out) = 0;
  // The inverse of SplitHeads: x [n, batch, heads, seq, head_dim] -> out
  // [batch, seq, n, heads, head_dim].
  virtual void MergeHeads(int batch, int seq, int n, int heads, int head_dim,
                          const float* x, float* out) = 0;
  // For each of `batch` [seq, seq] score matrices:
  // probs[i, j] = softmax_j(scale * scores[i, j]) over j <= i; 0 for j > i.
  // probs may alias scores.
  virtual void CausalSoftmaxForward(int batch, int seq, float scale,
                                    const float* scores, float* probs) = 0;
  // dscores = scale * probs * (dprobs - sum_j dprobs * probs) (0 above the
  // diagonal). dscores may alias dprobs.
  virtual void CausalSoftmaxBackward(int batch, int seq, float scale,
                                     const float* probs, const float* dprobs,
                                     float* dscores) = 0;

  // ---- Vector ops ---------------------------------------------------------------
  // y += alpha * x (residual add, gradient accumulation).
  virtual void Axpy(int64_t n, float alpha, const float* x, float* y) = 0;
  // out = a + b (out may alias a or b).
  virtual void Add(int64_t n, const float* a, const float* b, float* out) = 0;
  // x *= alpha.
  virtual void Scale(int64_t n, float alpha, float* x) = 0;
  // *result = sum of x[i]^2 (accumulated in at least fp32, double on CPU).
  // Global gradient norms add these partial sums across ranges / ranks.
  virtual void SumSquares(int64_t n, const float* x, float* result) = 0;
  // *result = number of non-finite (inf/NaN) values in x, as a float.
  virtual void CountNonFinite(int64_t n, const float* x, float* result) = 0;

  // ---- Precision conversion (bf16 / fp16 stored as uint16_t) -----------------
  // Round-to-nearest-even.
  virtual void CastF32ToBf16(int64_t n, const float* x, uint16_t* y) = 0;
  virtual void CastBf16ToF32(int64_t n, const uint16_t* x, float* y) = 0;
  virtual void CastF32ToF16(int64_t n, const float* x, uint16_t* y) = 0;
  virtual void CastF16ToF32(int64_t n, const uint16_t* x, float* y) = 0;
};

// ---- Registration hook for backends linked in optionally (CUDA) ---------------
// A factory returns the backend, or UnavailableError when its device is not
// present (CreateBackend then falls back to the CPU if allowed); any other
// error is returned as is.
using BackendFactory = std::function<absl::StatusOr<std::unique_ptr<Backend>>(
    const BackendOptions&)>;

// Registers `factory` under `name` ("cuda"); a second registration of the same
// name replaces the first. Thread-safe. Returns true so it can initialise a
// static registrar:
//   static const bool kRegistered =
//       tandem::kernels::RegisterBackendFactory("cuda", &CreateCudaBackend);
// (the library holding the registrar must be alwayslink = True).
bool RegisterBackendFactory(const std::string& name, BackendFactory factory);

// The registered factory for `name`, or nullptr. Thread-safe.
BackendFactory FindBackendFactory(const std::string& name);

// Names registered so far (sorted), for error messages.
std::vector<std::string> RegisteredBackendNames();

}  // namespace kernels
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_BACKEND_H_
