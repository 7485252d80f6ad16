#include "common/kernels/cuda/elementwise_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/kernels/cuda/activation.cuh"
#include "common/kernels/cuda/launch.cuh"

namespace tandem {
namespace cuda {
namespace {

using internal::ActGrad;
using internal::ApplyAct;
using internal::GlobalIndex;
using internal::GridFor;
using internal::GridStride;
using internal::kThreads;

// Column tiles for the fused backward: a block is 32 columns x 8 row lanes.
constexpr int kTileCols = 32;
constexpr int kTileRows = 8;

__global__ void BiasActForwardKernel(Act act, int64_t rows, int64_t cols,
                                     const float* bias, float* z, float* y) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    float v = z[i];
    if (bias != nullptr) v += bias[i % cols];
    z[i] = v;
    y[i] = ApplyAct(act, v);
  }
}

__global__ void BiasActForwardKeepGradKernel(Act act, int64_t rows,
                                             int64_t cols, const float* bias,
                                             float* z, float* y) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    float v = z[i];
    if (bias != nullptr) v += bias[i % cols];
    y[i] = ApplyAct(act, v);
    z[i] = ActGrad(act, v);
  }
}

__global__ void ActForwardKernel(Act act, int64_t n, const float* x, float* y) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    y[i] = ApplyAct(act, x[i]);
  }
}

__global__ void ActBackwardKernel(Act act, int64_t n, const float* x,
                                  const float* dy, float* dx) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    dx[i] = dy[i] * ActGrad(act, x[i]);
  }
}

// dz = dy * act'(z) over a [rows, cols] matrix (skipped when dz is null) and,
// if dbias is non-null,
// dbias[c] += column sums (dbias pre-scaled by the launcher). Block
// (32, 8): threadIdx.x picks the column inside the tile, threadIdx.y strides
// over rows; the 8 partial sums meet in shared memory and one atomicAdd per
// column per block lands in dbias.
__global__ void BiasActBackwardKernel(Act act, int64_t rows, int64_t cols,
                                      const float* z, const float* dy,
                                      float* dz, float* dbias) {
  __shared__ float partial[kTileRows][kTileCols + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileCols + threadIdx.x;
  float sum = 0.0f;
  if (c < cols) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kTileRows + threadIdx.y;
         r < rows; r += static_cast<int64_t>(gridDim.y) * kTileRows) {
      const int64_t i = r * cols + c;
      const float g = dy[i] * ActGrad(act, z[i]);
      if (dz != nullptr) dz[i] = g;
      sum += g;
    }
  }
  if (dbias == nullptr) return;  // uniform across the block
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int k = 0; k < kTileRows; ++k) total += partial[k][threadIdx.x];
    atomicAdd(&dbias[c], total);
  }
}

__global__ void ScaleOrZeroKernel(int64_t n, float beta, float* y) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    y[i] = beta == 0.0f ? 0.0f : beta * y[i];
  }
}

__global__ void FillKernel(int64_t n, float value, float* x) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) x[i] = value;
}

__global__ void AxpyKernel(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    y[i] += alpha * x[i];
  }
}

__global__ void AddKernel(int64_t n, const float* a, const float* b,
                          float* out) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    out[i] = a[i] + b[i];
  }
}

__global__ void ScaleKernel(int64_t n, float alpha, float* x) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) x[i] *= alpha;
}

// Pass 1 of the deterministic sum of squares: block b writes its partial
// sum (a fixed tree over a fixed set of indices: the grid depends only on n)
// to partial[b]. No atomics, so the result is the same bits on every run and
// every rank that reduces the same vector.
__global__ void SumSquaresPartialKernel(int64_t n, const float* x,
                                        double* partial) {
  double sum = 0.0;
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    const double v = x[i];
    sum += v * v;
  }
  sum = internal::BlockSum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// Pass 2: one block adds the `blocks` partials in a fixed order (strided per
// thread, then the block tree) and writes the result (float or double).
template <typename T>
__global__ void SumSquaresFinalKernel(int blocks, const double* partial,
                                      T* result) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) sum += partial[i];
  sum = internal::BlockSum(sum);
  if (threadIdx.x == 0) *result = static_cast<T>(sum);
}

template <typename T>
cudaError_t SumSquaresTwoPass(int64_t n, const float* x, double* scratch,
                              T* result, cudaStream_t stream) {
  const int blocks = n > 0 ? GridFor(n) : 0;
  if (blocks > 0) {
    SumSquaresPartialKernel<<<blocks, kThreads, 0, stream>>>(n, x, scratch);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  SumSquaresFinalKernel<T><<<1, kThreads, 0, stream>>>(blocks, scratch, result);
  return cudaGetLastError();
}

__global__ void CountNonFiniteKernel(int64_t n, const float* x,
                                     unsigned long long* acc) {
  unsigned long long count = 0;
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    if (!isfinite(x[i])) ++count;
  }
  count = internal::BlockSum(count);
  if (threadIdx.x == 0 && count != 0) atomicAdd(acc, count);
}

template <typename T>
__global__ void ToFloatKernel(const T* acc, float* result) {
  *result = static_cast<float>(*acc);
}

__global__ void F32ToBf16Kernel(int64_t n, const float* x, uint16_t* y) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
  }
}

__global__ void Bf16ToF32Kernel(int64_t n, const uint16_t* x, float* y) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    y[i] = __bfloat162float(__ushort_as_bfloat16(x[i]));
  }
}

__global__ void F32ToF16Kernel(int64_t n, const float* x, uint16_t* y) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    y[i] = __half_as_ushort(__float2half_rn(x[i]));
  }
}

__global__ void F16ToF32Kernel(int64_t n, const uint16_t* x, float* y) {
  for (int64_t i = GlobalIndex(); i < n; i += GridStride()) {
    y[i] = __half2float(__ushort_as_half(x[i]));
  }
}

}  // namespace

cudaError_t LaunchBiasActivationForward(Act act, int64_t rows, int64_t cols,
                                        const float* bias, float* z, float* y,
                                        cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  BiasActForwardKernel<<<GridFor(n), kThreads, 0, stream>>>(act, rows, cols,
                                                            bias, z, y);
  return cudaGetLastError();
}

cudaError_t LaunchBiasActivationForwardKeepGrad(Act act, int64_t rows,
                                                int64_t cols, const float* bias,
                                                float* z, float* y,
                                                cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  BiasActForwardKeepGradKernel<<<GridFor(n), kThreads, 0, stream>>>(
      act, rows, cols, bias, z, y);
  return cudaGetLastError();
}

cudaError_t LaunchBiasActivationBackward(Act act, int64_t rows, int64_t cols,
                                         const float* z, const float* dy,
                                         float* dz, float* dbias,
                                         float dbias_beta,
                                         cudaStream_t stream) {
  if (dbias != nullptr && cols > 0 && dbias_beta != 1.0f) {
    cudaError_t e = LaunchScaleOrZero(cols, dbias_beta, dbias, stream);
    if (e != cudaSuccess) return e;
  }
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int64_t col_tiles = (cols + kTileCols - 1) / kTileCols;
  // About 2048 blocks in all, at least one row lane each.
  int64_t row_blocks = (2048 + col_tiles - 1) / col_tiles;
  const int64_t max_row_blocks = (rows + kTileRows - 1) / kTileRows;
  if (row_blocks > max_row_blocks) row_blocks = max_row_blocks;
  if (row_blocks > 65535) row_blocks = 65535;
  if (row_blocks < 1) row_blocks = 1;
  dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_blocks));
  dim3 block(kTileCols, kTileRows);
  BiasActBackwardKernel<<<grid, block, 0, stream>>>(act, rows, cols, z, dy, dz,
                                                    dbias);
  return cudaGetLastError();
}

cudaError_t LaunchActivationForward(Act act, int64_t n, const float* x,
                                    float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ActForwardKernel<<<GridFor(n), kThreads, 0, stream>>>(act, n, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchActivationBackward(Act act, int64_t n, const float* x,
                                     const float* dy, float* dx,
                                     cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ActBackwardKernel<<<GridFor(n), kThreads, 0, stream>>>(act, n, x, dy, dx);
  return cudaGetLastError();
}

cudaError_t LaunchScaleOrZero(int64_t n, float beta, float* y,
                              cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleOrZeroKernel<<<GridFor(n), kThreads, 0, stream>>>(n, beta, y);
  return cudaGetLastError();
}

cudaError_t LaunchFill(int64_t n, float value, float* x, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillKernel<<<GridFor(n), kThreads, 0, stream>>>(n, value, x);
  return cudaGetLastError();
}

cudaError_t LaunchAxpy(int64_t n, float alpha, const float* x, float* y,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AxpyKernel<<<GridFor(n), kThreads, 0, stream>>>(n, alpha, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchAdd(int64_t n, const float* a, const float* b, float* out,
                      cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AddKernel<<<GridFor(n), kThreads, 0, stream>>>(n, a, b, out);
  return cudaGetLastError();
}

cudaError_t LaunchScale(int64_t n, float alpha, float* x, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<GridFor(n), kThreads, 0, stream>>>(n, alpha, x);
  return cudaGetLastError();
}

cudaError_t LaunchSumSquares(int64_t n, const float* x, double* scratch,
                             float* result, cudaStream_t stream) {
  return SumSquaresTwoPass(n, x, scratch, result, stream);
}

cudaError_t LaunchSumSquaresF64(int64_t n, const float* x, double* scratch,
                                double* result, cudaStream_t stream) {
  return SumSquaresTwoPass(n, x, scratch, result, stream);
}

int64_t SumSquaresScratchDoubles() { return internal::kMaxBlocks; }

cudaError_t LaunchCountNonFinite(int64_t n, const float* x,
                                 unsigned long long* scratch, float* result,
                                 cudaStream_t stream) {
  cudaError_t e =
      cudaMemsetAsync(scratch, 0, sizeof(unsigned long long), stream);
  if (e != cudaSuccess) return e;
  if (n > 0) {
    CountNonFiniteKernel<<<GridFor(n), kThreads, 0, stream>>>(n, x, scratch);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  ToFloatKernel<unsigned long long><<<1, 1, 0, stream>>>(scratch, result);
  return cudaGetLastError();
}

cudaError_t LaunchCastF32ToBf16(int64_t n, const float* x, uint16_t* y,
                                cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  F32ToBf16Kernel<<<GridFor(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchCastBf16ToF32(int64_t n, const uint16_t* x, float* y,
                                cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  Bf16ToF32Kernel<<<GridFor(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchCastF32ToF16(int64_t n, const float* x, uint16_t* y,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  F32ToF16Kernel<<<GridFor(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

cudaError_t LaunchCastF16ToF32(int64_t n, const uint16_t* x, float* y,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  F16ToF32Kernel<<<GridFor(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace tandem
