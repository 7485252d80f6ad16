#include "common/kernels/cuda/optimizer_kernels.h"

#include "common/kernels/cuda/launch.cuh"

namespace tandem {
namespace cuda {
namespace {

using internal::GlobalIndex;
using internal::GridFor;
using internal::GridStride;
using internal::kThreads;

// sgd.h, line by line.
__global__ void SgdStepKernel(int64_t n, SgdStepArgs a, float* params,
                              const float* grads, float* buf) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const float p = params[i];
    float g = __fmul_rn(grads[i], a.grad_scale);
    if (a.weight_decay != 0.0f) g = __fadd_rn(g, __fmul_rn(a.weight_decay, p));
    float d = g;
    if (a.momentum != 0.0f) {
      const float b = __fadd_rn(__fmul_rn(a.momentum, buf[i]), g);
      buf[i] = b;
      d = a.nesterov ? __fadd_rn(g, __fmul_rn(a.momentum, b)) : b;
    }
    params[i] = __fsub_rn(p, __fmul_rn(a.lr, d));
  }
}

// adamw.h, line by line.
__global__ void AdamWStepKernel(int64_t n, AdamWStepArgs a, float* params,
                                const float* grads, float* m_state,
                                float* v_state) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const float g = __fmul_rn(grads[i], a.grad_scale);
    const float p = __fmul_rn(params[i], a.decay);
    const float m = __fadd_rn(__fmul_rn(a.beta1, m_state[i]),
                              __fmul_rn(a.one_minus_beta1, g));
    const float v = __fadd_rn(__fmul_rn(a.beta2, v_state[i]),
                              __fmul_rn(a.one_minus_beta2, __fmul_rn(g, g)));
    m_state[i] = m;
    v_state[i] = v;
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v), a.inv_sqrt_bc2), a.eps);
    params[i] = __fsub_rn(p, __fmul_rn(a.step_size, __fdiv_rn(m, denom)));
  }
}

}  // namespace

cudaError_t LaunchSgdStep(int64_t n, const SgdStepArgs& args, float* params,
                          const float* grads, float* momentum_buffer,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (args.momentum != 0.0f && momentum_buffer == nullptr) {
    return cudaErrorInvalidValue;
  }
  SgdStepKernel<<<GridFor(n), kThreads, 0, stream>>>(n, args, params, grads,
                                                     momentum_buffer);
  return cudaGetLastError();
}

cudaError_t LaunchAdamWStep(int64_t n, const AdamWStepArgs& args,
                            float* params, const float* grads, float* exp_avg,
                            float* exp_avg_sq, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AdamWStepKernel<<<GridFor(n), kThreads, 0, stream>>>(n, args, params, grads,
                                                       exp_avg, exp_avg_sq);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace tandem
