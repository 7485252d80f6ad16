// Device-side helpers shared by the .cu files of the CUDA backend: launch
// geometry and block-wide reductions. Included only by nvcc-compiled code.
#ifndef TANDEM_COMMON_KERNELS_CUDA_LAUNCH_CUH_
#define TANDEM_COMMON_KERNELS_CUDA_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem {
namespace cuda {
namespace internal {

// Threads per block for 1-D element-wise kernels and per-row kernels.
constexpr int kThreads = 256;
// Enough blocks to fill an H200 (132 SMs x 2048 threads) many times over;
// kernels use grid-stride loops, so any size is covered.
constexpr int64_t kMaxBlocks = 8192;

inline int GridFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<int>(blocks);
}

// First index and stride of a 1-D grid-stride loop, in 64 bits.
__device__ __forceinline__ int64_t GlobalIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};

// Reduces `value` over the whole block and returns the result to every
// thread. Every thread of the block must call it (no divergent calls);
// blockDim.x must be a multiple of 32 and at most 1024. `identity` is the
// neutral element of `op`. Safe to call several times in a row: the leading
// barrier keeps one call's writes from racing the previous call's reads.
template <typename T, typename Op>
__device__ T BlockReduce(T value, Op op, T identity) {
  __shared__ T partial[32];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  __syncthreads();
  if (lane == 0) partial[warp] = value;
  __syncthreads();
  T total = lane < warps ? partial[lane] : identity;
  for (int offset = 16; offset > 0; offset >>= 1) {
    total = op(total, __shfl_xor_sync(0xffffffffu, total, offset));
  }
  return total;
}

template <typename T>
__device__ __forceinline__ T BlockSum(T value) {
  return BlockReduce(value, SumOp(), T(0));
}

__device__ __forceinline__ float BlockMax(float value) {
  return BlockReduce(value, MaxOp(), -INFINITY);
}

}  // namespace internal
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_LAUNCH_CUH_
