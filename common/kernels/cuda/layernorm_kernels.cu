#include "common/kernels/cuda/layernorm_kernels.h"

#include "common/kernels/cuda/elementwise_kernels.h"
#include "common/kernels/cuda/launch.cuh"

namespace tandem {
namespace cuda {
namespace {

using internal::BlockSum;
using internal::kThreads;

constexpr int kTileCols = 32;
constexpr int kTileRows = 8;

// One block per row (grid-stride over rows so any row count fits the grid).
// Two passes over the row for the variance: numerically safer than
// E[x^2] - E[x]^2, and the row is in L1/L2 the second time.
__global__ void LayerNormForwardKernel(int64_t rows, int64_t cols, float eps,
                                       const float* x, const float* gamma,
                                       const float* beta, float* y,
                                       float* mean_out, float* rstd_out) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += xr[c];
    const float mean = BlockSum(sum) / static_cast<float>(cols);
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = xr[c] - mean;
      sq += d * d;
    }
    const float var = BlockSum(sq) / static_cast<float>(cols);
    const float rstd = 1.0f / sqrtf(var + eps);
    float* yr = y + r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
    if (threadIdx.x == 0) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
__global__ void LayerNormBackwardDxKernel(int64_t rows, int64_t cols,
                                          const float* x, const float* gamma,
                                          const float* mean_in,
                                          const float* rstd_in,
                                          const float* dy, float* dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const float mean = mean_in[r];
    const float rstd = rstd_in[r];
    float sum_g = 0.0f;
    float sum_gx = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += g * (xr[c] - mean) * rstd;
    }
    const float mean_g = BlockSum(sum_g) / static_cast<float>(cols);
    const float mean_gx = BlockSum(sum_gx) / static_cast<float>(cols);
    float* dxr = dx + r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      dxr[c] = rstd * (dyr[c] * gamma[c] - mean_g - xhat * mean_gx);
    }
  }
}

// dgamma[c] += sum_r dy * xhat, dbeta[c] += sum_r dy; block (32, 8) over a
// 32-column tile, threadIdx.y striding rows, one atomicAdd per column/block.
__global__ void LayerNormParamGradKernel(int64_t rows, int64_t cols,
                                         const float* x, const float* mean_in,
                                         const float* rstd_in, const float* dy,
                                         float* dgamma, float* dbeta) {
  __shared__ float part_g[kTileRows][kTileCols + 1];
  __shared__ float part_b[kTileRows][kTileCols + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileCols + threadIdx.x;
  float sg = 0.0f;
  float sb = 0.0f;
  if (c < cols) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kTileRows + threadIdx.y;
         r < rows; r += static_cast<int64_t>(gridDim.y) * kTileRows) {
      const int64_t i = r * cols + c;
      const float xhat = (x[i] - mean_in[r]) * rstd_in[r];
      sg += dy[i] * xhat;
      sb += dy[i];
    }
  }
  part_g[threadIdx.y][threadIdx.x] = sg;
  part_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float tg = 0.0f;
    float tb = 0.0f;
    for (int k = 0; k < kTileRows; ++k) {
      tg += part_g[k][threadIdx.x];
      tb += part_b[k][threadIdx.x];
    }
    atomicAdd(&dgamma[c], tg);
    atomicAdd(&dbeta[c], tb);
  }
}

int RowGrid(int64_t rows) {
  return static_cast<int>(rows < 65535 ? (rows < 1 ? 1 : rows) : 65535);
}

}  // namespace

cudaError_t LaunchLayerNormForward(int64_t rows, int64_t cols, float eps,
                                   const float* x, const float* gamma,
                                   const float* beta, float* y, float* mean,
                                   float* rstd, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  LayerNormForwardKernel<<<RowGrid(rows), kThreads, 0, stream>>>(
      rows, cols, eps, x, gamma, beta, y, mean, rstd);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormBackward(int64_t rows, int64_t cols,
                                    const float* x, const float* gamma,
                                    const float* mean, const float* rstd,
                                    const float* dy, float* dx, float* dgamma,
                                    float* dbeta, float grad_beta,
                                    cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  if (grad_beta != 1.0f) {
    cudaError_t e = LaunchScaleOrZero(cols, grad_beta, dgamma, stream);
    if (e == cudaSuccess) e = LaunchScaleOrZero(cols, grad_beta, dbeta, stream);
    if (e != cudaSuccess) return e;
  }
  if (rows <= 0) return cudaSuccess;
  LayerNormBackwardDxKernel<<<RowGrid(rows), kThreads, 0, stream>>>(
      rows, cols, x, gamma, mean, rstd, dy, dx);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const int64_t col_tiles = (cols + kTileCols - 1) / kTileCols;
  int64_t row_blocks = (2048 + col_tiles - 1) / col_tiles;
  const int64_t max_row_blocks = (rows + kTileRows - 1) / kTileRows;
  if (row_blocks > max_row_blocks) row_blocks = max_row_blocks;
  if (row_blocks > 65535) row_blocks = 65535;
  if (row_blocks < 1) row_blocks = 1;
  dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_blocks));
  dim3 block(kTileCols, kTileRows);
  LayerNormParamGradKernel<<<grid, block, 0, stream>>>(rows, cols, x, mean,
                                                       rstd, dy, dgamma, dbeta);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace tandem
