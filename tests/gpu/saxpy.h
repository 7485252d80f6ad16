// A minimal CUDA kernel used to prove that .cu code builds, links and runs
// through tandem's Bazel rules (//tools/bazel:cuda.bzl). Not for production.
#ifndef TANDEM_TESTS_GPU_SAXPY_H_
#define TANDEM_TESTS_GPU_SAXPY_H_

#include <cstdint>
#include <string>

namespace tandem {

// Number of CUDA devices, or 0 when none is usable; `why` says why not.
int CudaDeviceCount(std::string* why);

// y[i] = a * x[i] + y[i] on the default device; host pointers in and out.
// Returns an empty string on success, else the CUDA error.
std::string SaxpyOnDevice(float a, const float* x, float* y, int64_t n);

}  // namespace tandem

#endif  // TANDEM_TESTS_GPU_SAXPY_H_
