// LayerNorm over the last dimension on the GPU, with the semantics of
// Backend::LayerNormForward / LayerNormBackward (common/kernels/backend.h).
// One block per row; the parameter gradients are column sums added with
// float atomics (not bit-reproducible run to run).
//
// Launchers enqueue on `stream`, return the launch error, never block or
// allocate. Thread-compatible.
#ifndef TANDEM_COMMON_KERNELS_CUDA_LAYERNORM_KERNELS_H_
#define TANDEM_COMMON_KERNELS_CUDA_LAYERNORM_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem {
namespace cuda {

// y = (x - mean) * rstd * gamma + beta per row of [rows, cols];
// mean[rows], rstd[rows] = 1 / sqrt(var + eps) (biased variance) saved.
cudaError_t LaunchLayerNormForward(int64_t rows, int64_t cols, float eps,
                                   const float* x, const float* gamma,
                                   const float* beta, float* y, float* mean,
                                   float* rstd, cudaStream_t stream);

// dx overwritten; dgamma = grad_beta * dgamma + sum_r dy * xhat and
// dbeta = grad_beta * dbeta + sum_r dy (grad_beta == 0 ignores old values).
cudaError_t LaunchLayerNormBackward(int64_t rows, int64_t cols,
                                    const float* x, const float* gamma,
                                    const float* mean, const float* rstd,
                                    const float* dy, float* dx, float* dgamma,
                                    float* dbeta, float grad_beta,
                                    cudaStream_t stream);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_LAYERNORM_KERNELS_H_
