// Softmax kernels of the CUDA backend: fused softmax + cross-entropy
// (forward: probabilities and the scaled summed loss; backward), row argmax,
// and the causal (lower-triangular) softmax of attention, forward and
// backward. Semantics are those of the Backend methods of the same names
// (common/kernels/backend.h). One block per row; reductions are block-wide.
//
// A label >= classes (a caller bug: the contract says labels < classes)
// makes the loss NaN, so it is seen rather than silently read out of bounds.
// Launchers enqueue on `stream`, return the launch error, never block or
// allocate. Thread-compatible.
#ifndef TANDEM_COMMON_KERNELS_CUDA_SOFTMAX_KERNELS_H_
#define TANDEM_COMMON_KERNELS_CUDA_SOFTMAX_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem {
namespace cuda {

// probs = softmax(logits) per row; *loss = scale * sum over rows with
// label >= 0 of -log probs[label] (overwritten). probs may alias logits.
cudaError_t LaunchSoftmaxCrossEntropyForward(int64_t rows, int64_t classes,
                                             const float* logits,
                                             const int32_t* labels,
                                             float scale, float* probs,
                                             float* loss, cudaStream_t stream);
// dlogits = scale * (probs - onehot(label)); zero rows where label < 0.
cudaError_t LaunchSoftmaxCrossEntropyBackward(int64_t rows, int64_t classes,
                                              const float* probs,
                                              const int32_t* labels,
                                              float scale, float* dlogits,
                                              cudaStream_t stream);
// out[r] = first index of the maximum of row r.
cudaError_t LaunchArgmaxRows(int64_t rows, int64_t cols, const float* x,
                             int32_t* out, cudaStream_t stream);

// For `batch` [seq, seq] matrices: probs[i, j] = softmax_j(scale * s[i, j])
// over j <= i, 0 above the diagonal. probs may alias scores.
cudaError_t LaunchCausalSoftmaxForward(int64_t batch, int64_t seq, float scale,
                                       const float* scores, float* probs,
                                       cudaStream_t stream);
// dscores = scale * probs * (dprobs - sum_j dprobs * probs), 0 above the
// diagonal. dscores may alias dprobs.
cudaError_t LaunchCausalSoftmaxBackward(int64_t batch, int64_t seq,
                                        float scale, const float* probs,
                                        const float* dprobs, float* dscores,
                                        cudaStream_t stream);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_SOFTMAX_KERNELS_H_
