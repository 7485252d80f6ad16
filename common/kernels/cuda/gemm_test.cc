// cuBLAS GEMMs in reduced precision against CPU fp32: bf16 storage with fp32
// accumulation (CublasGemm::GemmBf16*) and the backend's TF32 / bf16 math
// modes on fp32 data. Bounds: ~1e-4 against fp32 on the same bf16-rounded
// inputs (the products are exact in fp32), ~1e-2 against unrounded inputs.
// Skips without a device.
#include "common/kernels/cuda/gemm.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kernels/cpu_backend.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "common/kernels/cuda/gpu_test_util.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cuda {
namespace {

using kernels::Transpose;
using testing::Download;
using testing::ExpectAllClose;
using testing::MakeTwin;
using testing::RandomVector;
using testing::Twin;

class GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_SKIP_WITHOUT_GPU();
    cpu_ = std::make_unique<kernels::CpuBackend>();
    absl::StatusOr<std::unique_ptr<CudaBackend>> gpu =
        CudaBackend::Create(kernels::BackendOptions());
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
  }

  // Rounds host values to bf16 and back with the CPU backend's cast.
  std::vector<float> RoundToBf16(const std::vector<float>& v) {
    Twin t;
    EXPECT_TRUE(MakeTwin(*cpu_, *gpu_, v, &t).ok());
    std::vector<uint16_t> bits(v.size());
    cpu_->CastF32ToBf16(v.size(), t.r(), bits.data());
    std::vector<float> out(v.size());
    cpu_->CastBf16ToF32(v.size(), bits.data(), out.data());
    return out;
  }

  // C = A[m,k] * op(B) on the CPU in fp32 (the reference).
  std::vector<float> CpuGemm(bool tb, int m, int n, int k,
                             const std::vector<float>& a,
                             const std::vector<float>& b) {
    std::vector<float> c(int64_t{m} * n, 0.0f);
    cpu_->Gemm(Transpose::kNo, tb ? Transpose::kYes : Transpose::kNo, m, n, k,
               1.0f, a.data(), k, b.data(), tb ? k : n, 0.0f, c.data(), n);
    return c;
  }

  std::unique_ptr<kernels::CpuBackend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

TEST_F(GemmTest, Bf16InputsFp32Accumulate) {
  const int m = 67, n = 129, k = 257;
  for (bool tb : {false, true}) {
    const std::vector<float> a = RandomVector(int64_t{m} * k, 1);
    const std::vector<float> b = RandomVector(int64_t{k} * n, 2);
    Twin at, bt;
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, a, &at));
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, b, &bt));
    Twin a16, b16, c32, c16;
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<uint16_t>(a.size()), &a16));
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<uint16_t>(b.size()), &b16));
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<float>(int64_t{m} * n), &c32));
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<uint16_t>(int64_t{m} * n), &c16));
    gpu_->CastF32ToBf16(a.size(), at.d(), a16.du());
    gpu_->CastF32ToBf16(b.size(), bt.d(), b16.du());
    TANDEM_ASSERT_OK(gpu_->gemm().GemmBf16(false, tb, m, n, k, 1.0f, a16.du(),
                                           k, b16.du(), tb ? k : n, 0.0f,
                                           c32.d(), false, n));
    TANDEM_ASSERT_OK(gpu_->gemm().GemmBf16(false, tb, m, n, k, 1.0f, a16.du(),
                                           k, b16.du(), tb ? k : n, 0.0f,
                                           c16.du(), true, n));
    Twin c16f;
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<float>(int64_t{m} * n), &c16f));
    gpu_->CastBf16ToF32(int64_t{m} * n, c16.du(), c16f.d());

    std::vector<float> got32, got16;
    TANDEM_ASSERT_OK(Download(*gpu_, c32.d(), int64_t{m} * n, &got32));
    TANDEM_ASSERT_OK(Download(*gpu_, c16f.d(), int64_t{m} * n, &got16));
    const std::string what = absl::StrCat("tb=", tb);
    const std::vector<float> exact_inputs =
        CpuGemm(tb, m, n, k, RoundToBf16(a), RoundToBf16(b));
    ExpectAllClose(got32, exact_inputs, 1e-4, 1e-4, "bf16 in, fp32 out " + what);
    ExpectAllClose(got16, exact_inputs, 1e-2, 1e-2, "bf16 in, bf16 out " + what);
    const std::vector<float> fp32 = CpuGemm(tb, m, n, k, a, b);
    ExpectAllClose(got32, fp32, 1e-2, 5e-3 * std::sqrt(k),
                   "bf16 vs unrounded fp32 " + what);
  }
}

TEST_F(GemmTest, Bf16StridedBatched) {
  const int m = 33, n = 17, k = 65, batch = 4;
  const int64_t sa = int64_t{m} * k, sb = int64_t{k} * n, sc = int64_t{m} * n;
  const std::vector<float> a = RoundToBf16(RandomVector(sa * batch, 3));
  const std::vector<float> b = RoundToBf16(RandomVector(sb * batch, 4));
  Twin at, bt, a16, b16, c;
  TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, a, &at));
  TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, b, &bt));
  TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<uint16_t>(a.size()), &a16));
  TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<uint16_t>(b.size()), &b16));
  TANDEM_ASSERT_OK(MakeTwin(*cpu_, *gpu_, std::vector<float>(sc * batch), &c));
  gpu_->CastF32ToBf16(a.size(), at.d(), a16.du());
  gpu_->CastF32ToBf16(b.size(), bt.d(), b16.du());
  TANDEM_ASSERT_OK(gpu_->gemm().GemmBf16StridedBatched(
      false, false, m, n, k, 1.0f, a16.du(), k, sa, b16.du(), n, sb, 0.0f,
      c.d(), false, n, sc, batch));
  cpu_->GemmStridedBatched(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f,
                           at.r(), k, sa, bt.r(), n, sb, 0.0f, c.r(), n, sc,
                           batch);
  std::vector<float> want, got;
  TANDEM_ASSERT_OK(Download(*cpu_, c.r(), sc * batch, &want));
  TANDEM_ASSERT_OK(Download(*gpu_, c.d(), sc * batch, &got));
  ExpectAllClose(got, want, 1e-4, 1e-4, "bf16 strided batched");
}

TEST_F(GemmTest, TensorCoreMathModesOnFp32Data) {
  const int m = 96, n = 80, k = 256;
  const std::vector<float> a = RandomVector(int64_t{m} * k, 5);
  const std::vector<float> b = RandomVector(int64_t{k} * n, 6);
  const std::vector<float> want = CpuGemm(false, m, n, k, a, b);
  for (kernels::MathMode mode :
       {kernels::MathMode::kTf32, kernels::MathMode::kBf16}) {
    kernels::BackendOptions options;
    options.math_mode = mode;
    absl::StatusOr<std::unique_ptr<CudaBackend>> gpu =
        CudaBackend::Create(options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    Twin at, bt, ct;
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, **gpu, a, &at));
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, **gpu, b, &bt));
    TANDEM_ASSERT_OK(MakeTwin(*cpu_, **gpu, std::vector<float>(int64_t{m} * n), &ct));
    (*gpu)->Gemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, at.d(), k,
                 bt.d(), n, 0.0f, ct.d(), n);
    std::vector<float> got;
    TANDEM_ASSERT_OK(Download(**gpu, ct.d(), int64_t{m} * n, &got));
    ExpectAllClose(got, want, 1e-2, 5e-3 * std::sqrt(k),
                   absl::StrCat("math mode ", static_cast<int>(mode)));
    // Release the buffers before their backend.
    at = Twin();
    bt = Twin();
    ct = Twin();
  }
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
