// Device functions for the activations (shared by .cu files). GELU is the
// tanh approximation, as GPT-2 and PyTorch's gelu(approximate="tanh"):
//   gelu(x)  = 0.5 x (1 + tanh(k (x + 0.044715 x^3))),  k = sqrt(2 / pi)
//   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)
#ifndef TANDEM_COMMON_KERNELS_CUDA_ACTIVATION_CUH_
#define TANDEM_COMMON_KERNELS_CUDA_ACTIVATION_CUH_

#include "common/kernels/cuda/elementwise_kernels.h"

namespace tandem {
namespace cuda {
namespace internal {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

__device__ __forceinline__ float ApplyAct(Act act, float x) {
  switch (act) {
    case Act::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Act::kGeluTanh: {
      float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
      return 0.5f * x * (1.0f + t);
    }
    default:
      return x;
  }
}

// d act(x) / dx.
__device__ __forceinline__ float ActGrad(Act act, float x) {
  switch (act) {
    case Act::kRelu:
      return x > 0.0f ? 1.0f : 0.0f;
    case Act::kGeluTanh: {
      float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
      return 0.5f * (1.0f + t) +
             0.5f * x * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluC * x * x);
    }
    case Act::kSavedGrad:
      return x;
    default:
      return 1.0f;
  }
}

}  // namespace internal
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_ACTIVATION_CUH_
