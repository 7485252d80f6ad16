#include "common/kernels/cuda/cuda_backend.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/kernels/cuda/cuda_status.h"
#include "common/kernels/cuda/device.h"
#include "common/kernels/cuda/elementwise_kernels.h"
#include "common/kernels/cuda/embedding_kernels.h"
#include "common/kernels/cuda/layernorm_kernels.h"
#include "common/kernels/cuda/softmax_kernels.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace cuda {
namespace {

using kernels::Activation;
using kernels::Transpose;

Act ToAct(Activation act) {
  switch (act) {
    case Activation::kRelu:
      return Act::kRelu;
    case Activation::kGelu:
      return Act::kGeluTanh;
    default:
      return Act::kNone;
  }
}

GemmMath ToGemmMath(kernels::MathMode mode) {
  switch (mode) {
    case kernels::MathMode::kTf32:
      return GemmMath::kTf32;
    case kernels::MathMode::kBf16:
      return GemmMath::kBf16;
    default:
      return GemmMath::kFp32;
  }
}

bool Yes(Transpose t) { return t == Transpose::kYes; }

size_t ScratchBytes() {
  const size_t partials = static_cast<size_t>(SumSquaresScratchDoubles()) * sizeof(double);
  return partials > 16 ? partials : 16;
}

void FreeStaging(void* pinned, cudaEvent_t* events, int n) {
  for (int i = 0; i < n; ++i) {
    if (events[i] != nullptr) cudaEventDestroy(events[i]);
  }
  if (pinned != nullptr) cudaFreeHost(pinned);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const kernels::BackendOptions& options) {
  ASSIGN_OR_RETURN(int count, DeviceCount());
  if (count == 0) {
    return absl::UnavailableError(
        "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)");
  }
  const int device = options.cuda_device;
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_device ", device, " does not exist; ", count,
                     " device(s) visible, use 0..", count - 1));
  }
  RETURN_IF_CUDA_ERROR(cudaSetDevice(device),
                       absl::StrCat("cudaSetDevice(", device, ")"));
  cudaStream_t stream = nullptr;
  RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                       "cudaStreamCreate for the backend stream");
  absl::StatusOr<std::unique_ptr<CublasGemm>> gemm = CublasGemm::Create(stream);
  if (!gemm.ok()) {
    cudaStreamDestroy(stream);
    return gemm.status();
  }
  void* scratch = nullptr;
  Staging staging;
  absl::Status status = CudaStatus(cudaMalloc(&scratch, ScratchBytes()),
                                   "cudaMalloc of the reduction scratch");
  if (status.ok()) {
    status = CudaStatus(
        cudaHostAlloc(&staging.pinned, kStagingSlots * kStagingSlotBytes,
                      cudaHostAllocDefault),
        "cudaHostAlloc of the pinned staging ring");
  }
  for (int i = 0; i < kStagingSlots && status.ok(); ++i) {
    status = CudaStatus(
        cudaEventCreateWithFlags(&staging.done[i], cudaEventDisableTiming),
        "cudaEventCreate for the staging ring");
  }
  if (!status.ok()) {
    FreeStaging(staging.pinned, staging.done, kStagingSlots);
    if (scratch != nullptr) cudaFree(scratch);
    gemm->reset();
    cudaStreamDestroy(stream);
    return status;
  }
  return std::unique_ptr<CudaBackend>(
      new CudaBackend(device, stream, ToGemmMath(options.math_mode),
                      std::move(*gemm), scratch, staging));
}

CudaBackend::CudaBackend(int device, cudaStream_t stream, GemmMath math,
                         std::unique_ptr<CublasGemm> gemm, void* scratch,
                         Staging staging)
    : device_(device),
      stream_(stream),
      math_(math),
      gemm_(std::move(gemm)),
      scratch_(scratch),
      staging_(staging) {}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  gemm_.reset();
  cudaFree(scratch_);
  FreeStaging(staging_.pinned, staging_.done, kStagingSlots);
  cudaStreamDestroy(stream_);
}

void CudaBackend::Note(cudaError_t error, const char* operation) {
  if (check_each_call_ && error == cudaSuccess) {
    // Wait here so a fault inside this operation's kernels is named after it,
    // not after whichever call happens to observe it next.
    error = cudaStreamSynchronize(stream_);
  }
  if (error != cudaSuccess && pending_.ok()) {
    pending_ = check_each_call_
                   ? CudaStatus(error, operation)
                   : CudaStatus(error, absl::StrCat(operation,
                                                    " (or an earlier "
                                                    "asynchronous operation "
                                                    "on this stream)"));
  }
}

void CudaBackend::Note(const absl::Status& status) {
  if (!status.ok() && pending_.ok()) pending_ = status;
  if (check_each_call_ && status.ok()) Note(cudaSuccess, "cuBLAS call");
}

absl::Status CudaBackend::TakePending() {
  absl::Status status = std::move(pending_);
  pending_ = absl::OkStatus();
  return status;
}

absl::Status CudaBackend::Synchronize() {
  Note(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (an earlier "
                                       "kernel failed)");
  return TakePending();
}

absl::StatusOr<void*> CudaBackend::AllocateRaw(size_t bytes) {
  RETURN_IF_CUDA_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  void* ptr = nullptr;
  RETURN_IF_CUDA_ERROR(cudaMalloc(&ptr, bytes),
                       absl::StrCat("cudaMalloc of ", bytes, " bytes"));
  return ptr;
}

void CudaBackend::Free(void* ptr) {
  // cudaFree waits for the device; queued kernels using ptr finish first.
  Note(cudaFree(ptr), "cudaFree");
}

absl::Status CudaBackend::CopyToDevice(void* dst, const void* host_src,
                                       size_t bytes) {
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(host_src);
  while (bytes > 0 && pending_.ok()) {
    const size_t chunk = bytes < kStagingSlotBytes ? bytes : kStagingSlotBytes;
    const int slot = next_slot_;
    next_slot_ = (next_slot_ + 1) % kStagingSlots;
    // The slot's previous copy must have left the pinned buffer; the other
    // slot's copy (and all earlier kernels) may still be running.
    cudaError_t e = cudaEventSynchronize(staging_.done[slot]);
    if (e != cudaSuccess) {
      Note(e, "waiting for a pinned staging slot");
      break;
    }
    char* pinned =
        static_cast<char*>(staging_.pinned) + slot * kStagingSlotBytes;
    std::memcpy(pinned, in, chunk);
    e = cudaMemcpyAsync(out, pinned, chunk, cudaMemcpyHostToDevice, stream_);
    if (e == cudaSuccess) e = cudaEventRecord(staging_.done[slot], stream_);
    Note(e, "cudaMemcpyAsync host to device (pinned staging)");
    out += chunk;
    in += chunk;
    bytes -= chunk;
  }
  return TakePending();
}

absl::Status CudaBackend::CopyToHost(void* host_dst, const void* src,
                                     size_t bytes) {
  Note(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
       "cudaMemcpyAsync device to host");
  return Synchronize();
}

void CudaBackend::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  Note(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
       "cudaMemcpyAsync device to device");
}

void CudaBackend::Fill(float* x, int64_t n, float value) {
  Note(LaunchFill(n, value, x, stream_), "Fill");
}

void CudaBackend::Gemm(Transpose ta, Transpose tb, int m, int n, int k,
                       float alpha, const float* a, int lda, const float* b,
                       int ldb, float beta, float* c, int ldc) {
  Note(gemm_->Gemm(math_, Yes(ta), Yes(tb), m, n, k, alpha, a, lda, b, ldb,
                   beta, c, ldc));
}

void CudaBackend::GemmStridedBatched(Transpose ta, Transpose tb, int m, int n,
                                     int k, float alpha, const float* a,
                                     int lda, int64_t stride_a, const float* b,
                                     int ldb, int64_t stride_b, float beta,
                                     float* c, int ldc, int64_t stride_c,
                                     int batch) {
  Note(gemm_->GemmStridedBatched(math_, Yes(ta), Yes(tb), m, n, k, alpha, a,
                                 lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                                 stride_c, batch));
}

void CudaBackend::BiasActivationForward(Activation act, int rows, int cols,
                                        const float* bias, float* z,
                                        float* y) {
  Note(LaunchBiasActivationForward(ToAct(act), rows, cols, bias, z, y,
                                   stream_),
       "BiasActivationForward");
}

void CudaBackend::BiasActivationBackward(Activation act, int rows, int cols,
                                         const float* z, const float* dy,
                                         float* dz, float* dbias,
                                         float dbias_beta) {
  Note(LaunchBiasActivationBackward(ToAct(act), rows, cols, z, dy, dz, dbias,
                                    dbias_beta, stream_),
       "BiasActivationBackward");
}

void CudaBackend::BiasActivationForwardKeepGrad(Activation act, int rows,
                                                int cols, const float* bias,
                                                float* z, float* y) {
  Note(LaunchBiasActivationForwardKeepGrad(ToAct(act), rows, cols, bias, z, y,
                                           stream_),
       "BiasActivationForwardKeepGrad");
}

void CudaBackend::BiasActivationBackwardFromGrad(int rows, int cols,
                                                 const float* act_grad,
                                                 const float* dy, float* dz,
                                                 float* dbias,
                                                 float dbias_beta) {
  // The fused backward with the saved derivative standing in for z.
  Note(LaunchBiasActivationBackward(Act::kSavedGrad, rows, cols, act_grad, dy,
                                    dz, dbias, dbias_beta, stream_),
       "BiasActivationBackwardFromGrad");
}

void CudaBackend::ActivationForward(Activation act, int64_t n, const float* x,
                                    float* y) {
  Note(LaunchActivationForward(ToAct(act), n, x, y, stream_),
       "ActivationForward");
}

void CudaBackend::ActivationBackward(Activation act, int64_t n, const float* x,
                                     const float* dy, float* dx) {
  Note(LaunchActivationBackward(ToAct(act), n, x, dy, dx, stream_),
       "ActivationBackward");
}

void CudaBackend::BiasGrad(int rows, int cols, const float* dy, float beta,
                           float* dbias) {
  // The fused backward with the identity and no dz output: a column sum.
  Note(LaunchBiasActivationBackward(Act::kNone, rows, cols, dy, dy, nullptr,
                                    dbias, beta, stream_),
       "BiasGrad");
}

void CudaBackend::LayerNormForward(int rows, int cols, float eps,
                                   const float* x, const float* gamma,
                                   const float* beta_param, float* y,
                                   float* mean, float* rstd) {
  Note(LaunchLayerNormForward(rows, cols, eps, x, gamma, beta_param, y, mean,
                              rstd, stream_),
       "LayerNormForward");
}

void CudaBackend::LayerNormBackward(int rows, int cols, const float* x,
                                    const float* gamma, const float* mean,
                                    const float* rstd, const float* dy,
                                    float* dx, float* dgamma,
                                    float* dbeta_param, float grad_beta) {
  Note(LaunchLayerNormBackward(rows, cols, x, gamma, mean, rstd, dy, dx,
                               dgamma, dbeta_param, grad_beta, stream_),
       "LayerNormBackward");
}

void CudaBackend::SoftmaxCrossEntropyForward(int rows, int classes,
                                             const float* logits,
                                             const int32_t* labels,
                                             float scale, float* probs,
                                             float* loss) {
  Note(LaunchSoftmaxCrossEntropyForward(rows, classes, logits, labels, scale,
                                        probs, loss, stream_),
       "SoftmaxCrossEntropyForward");
}

void CudaBackend::SoftmaxCrossEntropyBackward(int rows, int classes,
                                              const float* probs,
                                              const int32_t* labels,
                                              float scale, float* dlogits) {
  Note(LaunchSoftmaxCrossEntropyBackward(rows, classes, probs, labels, scale,
                                         dlogits, stream_),
       "SoftmaxCrossEntropyBackward");
}

void CudaBackend::ArgmaxRows(int rows, int cols, const float* x,
                             int32_t* out) {
  Note(LaunchArgmaxRows(rows, cols, x, out, stream_), "ArgmaxRows");
}

void CudaBackend::EmbeddingForward(int batch, int seq, int dim,
                                   const int32_t* ids,
                                   const float* token_table,
                                   const float* pos_table, float* out) {
  // The interface does not pass the vocabulary size; ids are trusted to be
  // in range (checked by the caller), so the bound is only "non-negative".
  Note(LaunchEmbeddingForward(batch, seq, dim, INT32_MAX, ids, token_table,
                              pos_table, out, stream_),
       "EmbeddingForward");
}

void CudaBackend::EmbeddingBackward(int batch, int seq, int dim,
                                    const int32_t* ids, const float* dout,
                                    float* dtoken, float* dpos) {
  Note(LaunchEmbeddingBackward(batch, seq, dim, INT32_MAX, ids, dout, dtoken,
                               dpos, stream_),
       "EmbeddingBackward");
}

void CudaBackend::SplitHeads(int batch, int seq, int n, int heads,
                             int head_dim, const float* x, float* out) {
  Note(LaunchSplitHeads(batch, seq, n, heads, head_dim, x, out, stream_),
       "SplitHeads");
}

void CudaBackend::MergeHeads(int batch, int seq, int n, int heads,
                             int head_dim, const float* x, float* out) {
  Note(LaunchMergeHeads(batch, seq, n, heads, head_dim, x, out, stream_),
       "MergeHeads");
}

void CudaBackend::CausalSoftmaxForward(int batch, int seq, float scale,
                                       const float* scores, float* probs) {
  Note(LaunchCausalSoftmaxForward(batch, seq, scale, scores, probs, stream_),
       "CausalSoftmaxForward");
}

void CudaBackend::CausalSoftmaxBackward(int batch, int seq, float scale,
                                        const float* probs,
                                        const float* dprobs, float* dscores) {
  Note(LaunchCausalSoftmaxBackward(batch, seq, scale, probs, dprobs, dscores,
                                   stream_),
       "CausalSoftmaxBackward");
}

void CudaBackend::Axpy(int64_t n, float alpha, const float* x, float* y) {
  Note(LaunchAxpy(n, alpha, x, y, stream_), "Axpy");
}

void CudaBackend::Add(int64_t n, const float* a, const float* b, float* out) {
  Note(LaunchAdd(n, a, b, out, stream_), "Add");
}

void CudaBackend::Scale(int64_t n, float alpha, float* x) {
  Note(LaunchScale(n, alpha, x, stream_), "Scale");
}

void CudaBackend::SumSquares(int64_t n, const float* x, float* result) {
  Note(LaunchSumSquares(n, x, static_cast<double*>(scratch_), result, stream_),
       "SumSquares");
}

void CudaBackend::CountNonFinite(int64_t n, const float* x, float* result) {
  Note(LaunchCountNonFinite(n, x,
                            static_cast<unsigned long long*>(scratch_),
                            result, stream_),
       "CountNonFinite");
}

void CudaBackend::CastF32ToBf16(int64_t n, const float* x, uint16_t* y) {
  Note(LaunchCastF32ToBf16(n, x, y, stream_), "CastF32ToBf16");
}

void CudaBackend::CastBf16ToF32(int64_t n, const uint16_t* x, float* y) {
  Note(LaunchCastBf16ToF32(n, x, y, stream_), "CastBf16ToF32");
}

void CudaBackend::CastF32ToF16(int64_t n, const float* x, uint16_t* y) {
  Note(LaunchCastF32ToF16(n, x, y, stream_), "CastF32ToF16");
}

void CudaBackend::CastF16ToF32(int64_t n, const uint16_t* x, float* y) {
  Note(LaunchCastF16ToF32(n, x, y, stream_), "CastF16ToF32");
}

absl::StatusOr<std::unique_ptr<kernels::Backend>> CreateCudaBackend(
    const kernels::BackendOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend,
                   CudaBackend::Create(options));
  return std::unique_ptr<kernels::Backend>(std::move(backend));
}

namespace {
// Linking this library (alwayslink) makes CreateBackend("cuda") find it.
const bool kRegistered =
    kernels::RegisterBackendFactory("cuda", &CreateCudaBackend);
}  // namespace

}  // namespace cuda
}  // namespace tandem
