// Fused optimizer updates on the GPU: one pass over params, grads and state
// per step, with exactly the order of operations documented in
// common/optim/sgd.h and common/optim/adamw.h (every multiply and add is an
// explicitly rounded __fmul_rn / __fadd_rn, so no FMA contraction; sqrt and
// division are IEEE), so results match the CPU optimizers to the last bit
// or an ulp. Per-step scalars come from the host (for AdamW, exactly
// optim::ComputeAdamWScalars).
//
// Pointers address the optimizer's own range (n elements). Launchers enqueue
// on `stream`, return the launch error, never block or allocate.
// Thread-compatible.
#ifndef TANDEM_COMMON_KERNELS_CUDA_OPTIMIZER_KERNELS_H_
#define TANDEM_COMMON_KERNELS_CUDA_OPTIMIZER_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem {
namespace cuda {

struct SgdStepArgs {
  float lr = 0.0f;
  float momentum = 0.0f;      // 0: momentum_buffer is not touched (may be null)
  bool nesterov = false;
  float weight_decay = 0.0f;  // coupled (added to the gradient)
  float grad_scale = 1.0f;
};

struct AdamWStepArgs {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float grad_scale = 1.0f;
  // optim::AdamWScalars for this step.
  float decay = 1.0f;
  float step_size = 0.0f;
  float inv_sqrt_bc2 = 1.0f;
  float one_minus_beta1 = 0.1f;
  float one_minus_beta2 = 0.001f;
};

cudaError_t LaunchSgdStep(int64_t n, const SgdStepArgs& args, float* params,
                          const float* grads, float* momentum_buffer,
                          cudaStream_t stream);

cudaError_t LaunchAdamWStep(int64_t n, const AdamWStepArgs& args,
                            float* params, const float* grads, float* exp_avg,
                            float* exp_avg_sq, cudaStream_t stream);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_OPTIMIZER_KERNELS_H_
