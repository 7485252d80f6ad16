// On a GPU: the CUDA int8 kernels give the CPU codec's bytes, residuals and
// decoded floats bit for bit (nearest and stochastic rounding, with and
// without error feedback, ragged sizes). Skips without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/codec/codec_factory.h"
#include "common/codec/cuda_codec_kernels.h"
#include "common/kernels/cuda/gpu_test_util.h"
#include "gtest/gtest.h"

namespace tandem {
namespace codec {
namespace {

// A device array whose every CUDA call's result is returned to the test.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n)
      : n_(n), alloc_(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T))) {}
  ~DeviceArray() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  cudaError_t alloc_status() const { return alloc_; }
  T* get() { return p_; }
  cudaError_t Put(const std::vector<T>& v) {
    return cudaMemcpy(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  cudaError_t Get(std::vector<T>* v) {
    v->resize(n_);
    return cudaMemcpy(v->data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
  }

 private:
  size_t n_;
  T* p_ = nullptr;
  cudaError_t alloc_;
};

TEST(CudaInt8Kernels, MatchTheCpuCodecBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  for (const char* rounding : {"nearest", "stochastic"}) {
    for (bool feedback : {false, true}) {
      for (int64_t n : {1, 255, 257, 2049, 100003}) {
        CodecConfig c;
        c.chunk = 256;
        c.rounding = rounding;
        std::unique_ptr<Codec> codec = *CreateCodec(c);
        std::mt19937 rng(static_cast<uint32_t>(n));
        std::normal_distribution<float> d(0.f, 1.f);
        std::vector<float> x(n), r(n);
        for (int64_t i = 0; i < n; ++i) {
          x[i] = d(rng) * (1 + (i / 256) % 7);
          r[i] = 0.01f * d(rng);
        }
        const int64_t bytes = codec->MaxEncodedBytes(n);
        std::vector<uint8_t> cpu(bytes);
        std::vector<float> cpu_r = r;
        EncodeParams p;
        p.seed = 77;
        if (feedback) {
          codec->EncodeWithFeedback(x.data(), cpu_r.data(), n, p, cpu.data());
        } else {
          codec->Encode(x.data(), n, p, cpu.data());
        }
        DeviceArray<float> dx(n), dr(n), dy(n);
        DeviceArray<uint8_t> dout(bytes);
        ASSERT_EQ(dx.alloc_status(), cudaSuccess);
        ASSERT_EQ(dr.alloc_status(), cudaSuccess);
        ASSERT_EQ(dy.alloc_status(), cudaSuccess);
        ASSERT_EQ(dout.alloc_status(), cudaSuccess);
        ASSERT_EQ(dx.Put(x), cudaSuccess);
        ASSERT_EQ(dr.Put(r), cudaSuccess);
        ASSERT_EQ(cuda::LaunchInt8Encode(n, 256, std::string(rounding) == "stochastic", 77,
                                         dx.get(), feedback ? dr.get() : nullptr, dout.get(), 0),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint8_t> gpu;
        ASSERT_EQ(dout.Get(&gpu), cudaSuccess);
        EXPECT_EQ(gpu, cpu) << rounding << " ef " << feedback << " n " << n;
        if (feedback) {
          std::vector<float> gpu_r;
          ASSERT_EQ(dr.Get(&gpu_r), cudaSuccess);
          EXPECT_EQ(gpu_r, cpu_r) << rounding << " n " << n;
        }
        std::vector<float> y(n, 0.5f), cpu_y(n, 0.5f), gpu_y;
        ASSERT_EQ(dy.Put(y), cudaSuccess);
        ASSERT_EQ(cuda::LaunchInt8Decode(n, 256, true, dout.get(), dy.get(), 0), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        codec->DecodeAdd(cpu.data(), n, cpu_y.data());
        ASSERT_EQ(dy.Get(&gpu_y), cudaSuccess);
        EXPECT_EQ(gpu_y, cpu_y) << "n " << n;
      }
    }
  }
}

}  // namespace
}  // namespace codec
}  // namespace tandem
