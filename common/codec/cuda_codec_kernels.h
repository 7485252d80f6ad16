// The int8 codec (int8_codec.h) on the GPU: encode (optionally with error
// feedback fused: v = x + residual, codes, residual = v - decoded, in one
// kernel) and decode / decode-add, producing the same bytes and floats as
// the CPU codec bit for bit (every multiply, add and divide explicitly
// rounded, the same dither hash, the same floor). One thread block per
// chunk of `chunk` values (<= 2048): it reduces the chunk's max |v|, writes
// the scale, then the codes. Block layout as the CPU's: ceil(n / chunk)
// fp32 scales, then n int8 codes.
//
// Pointers are device memory; `residual` may be null (no feedback).
// Launchers enqueue on `stream` and return the launch error; they never
// block or allocate. Thread-compatible. Exists only with the CUDA toolkit.
#ifndef TANDEM_COMMON_CODEC_CUDA_CODEC_KERNELS_H_
#define TANDEM_COMMON_CODEC_CUDA_CODEC_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem {
namespace codec {
namespace cuda {

cudaError_t LaunchInt8Encode(int64_t n, int64_t chunk, bool stochastic, uint64_t seed,
                             const float* x, float* residual, uint8_t* out, cudaStream_t stream);

cudaError_t LaunchInt8Decode(int64_t n, int64_t chunk, bool add, const uint8_t* in, float* out,
                             cudaStream_t stream);

}  // namespace cuda
}  // namespace codec
}  // namespace tandem

#endif  // TANDEM_COMMON_CODEC_CUDA_CODEC_KERNELS_H_
