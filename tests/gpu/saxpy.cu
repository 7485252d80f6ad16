#include "tests/gpu/saxpy.h"

#include <cuda_runtime.h>

namespace tandem {
namespace {

__global__ void SaxpyKernel(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

std::string Err(const char* op, cudaError_t e) {
  return std::string(op) + ": " + cudaGetErrorString(e);
}

}  // namespace

int CudaDeviceCount(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = Err("cudaGetDeviceCount", e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

std::string SaxpyOnDevice(float a, const float* x, float* y, int64_t n) {
  float* dx = nullptr;
  float* dy = nullptr;
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaError_t e = cudaMalloc(&dx, bytes);
  if (e != cudaSuccess) return Err("cudaMalloc", e);
  e = cudaMalloc(&dy, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) {
    SaxpyKernel<<<256, 256>>>(a, dx, dy, n);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  return e == cudaSuccess ? std::string() : Err("saxpy", e);
}

}  // namespace tandem
