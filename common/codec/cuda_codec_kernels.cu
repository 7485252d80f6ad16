#include "common/codec/cuda_codec_kernels.h"

#include <cfloat>

namespace tandem {
namespace codec {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// The CPU codec's hash (int8_codec.cc), bit for bit.
__device__ __forceinline__ uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

inline uint32_t Mix32Host(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

uint32_t SeedWord(uint64_t seed) {
  return Mix32Host(static_cast<uint32_t>(seed) ^
                   Mix32Host(static_cast<uint32_t>(seed >> 32) + 0x9e3779b9u));
}

__device__ __forceinline__ float Dither(uint32_t seed_word, uint32_t i) {
  return __fmul_rn(static_cast<float>(static_cast<int32_t>(Mix32(i * 0x9e3779b1u ^ seed_word) >> 8)),
                   1.0f / 16777216.0f);
}

__device__ __forceinline__ int32_t Code(float v, float inv, bool stochastic, float dither) {
  if (!stochastic) return __float2int_rn(__fmul_rn(v, inv));
  const float x = __fadd_rn(__fmul_rn(v, inv), dither);
  int32_t q = __float2int_rz(x);
  q -= __int2float_rn(q) > x ? 1 : 0;
  return min(q, 127);
}

__global__ void Int8EncodeKernel(int64_t n, int64_t chunk, bool stochastic, uint32_t seed_word,
                                 const float* __restrict__ x, float* __restrict__ r,
                                 uint8_t* __restrict__ out, int64_t chunks) {
  const int64_t c = blockIdx.x;
  const int64_t lo = c * chunk;
  const int64_t m = min(chunk, n - lo);
  int8_t* q = reinterpret_cast<int8_t*>(out + 4 * chunks) + lo;
  // Pass 1: v (into the residual when there is one) and max |v| on the bits.
  uint32_t best = 0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    float v = x[lo + i];
    if (r != nullptr) {
      v = __fadd_rn(v, r[lo + i]);
      r[lo + i] = v;
    }
    best = max(best, __float_as_uint(v) & 0x7fffffffu);
  }
  for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(0xffffffffu, best, off));
  __shared__ uint32_t warp_best[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  __shared__ float shared_scale, shared_inv;
  if (threadIdx.x == 0) {
    uint32_t b = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) b = max(b, warp_best[w]);
    const float max_abs = __uint_as_float(b);
    shared_scale = __fdiv_rn(max_abs, 127.f);
    shared_inv = max_abs > 0.f && max_abs <= FLT_MAX ? __fdiv_rn(127.f, max_abs) : 0.f;
    reinterpret_cast<float*>(out)[c] = shared_scale;
  }
  __syncthreads();
  const float scale = shared_scale, inv = shared_inv;
  // Pass 2: codes, and the new residual.
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const float v = r != nullptr ? r[lo + i] : x[lo + i];
    const float d = stochastic ? Dither(seed_word, static_cast<uint32_t>(lo + i)) : 0.f;
    const int32_t code = Code(v, inv, stochastic, d);
    q[i] = static_cast<int8_t>(code);
    if (r != nullptr) {
      const float e = __fsub_rn(v, __fmul_rn(__int2float_rn(code), scale));
      r[lo + i] = fabsf(e) <= FLT_MAX ? e : 0.f;
    }
  }
}

__global__ void Int8DecodeKernel(int64_t n, int64_t chunk, bool add, const uint8_t* __restrict__ in,
                                 float* __restrict__ out, int64_t chunks) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float scale = reinterpret_cast<const float*>(in)[i / chunk];
  const int8_t q = reinterpret_cast<const int8_t*>(in + 4 * chunks)[i];
  const float v = __fmul_rn(static_cast<float>(q), scale);
  out[i] = add ? __fadd_rn(out[i], v) : v;
}

}  // namespace

cudaError_t LaunchInt8Encode(int64_t n, int64_t chunk, bool stochastic, uint64_t seed,
                             const float* x, float* residual, uint8_t* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (chunk <= 0) return cudaErrorInvalidValue;
  const int64_t chunks = (n + chunk - 1) / chunk;
  Int8EncodeKernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
      n, chunk, stochastic, SeedWord(seed), x, residual, out, chunks);
  return cudaGetLastError();
}

cudaError_t LaunchInt8Decode(int64_t n, int64_t chunk, bool add, const uint8_t* in, float* out,
                             cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (chunk <= 0) return cudaErrorInvalidValue;
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  Int8DecodeKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, chunk, add, in, out,
                                                                          chunks);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace codec
}  // namespace tandem
