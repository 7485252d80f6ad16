// CudaBackend's BiasActivationForwardKeepGrad / BiasActivationBackwardFromGrad
// (the forward that keeps act'(z), the backward that only multiplies) against
// CpuBackend's, on identical seeded inputs with odd shapes; and the pair
// against the plain forward + backward on the GPU itself. Skips without a
// device.
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

using kernels::Activation;
using testing::MakeTwin;
using testing::RandomVector;
using testing::Twin;

class CudaActivationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_SKIP_WITHOUT_GPU();
    kernels::BackendOptions options;
    cpu_ = std::make_unique<kernels::CpuBackend>(options);
    absl::StatusOr<std::unique_ptr<CudaBackend>> gpu = CudaBackend::Create(options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
    gpu_->set_check_each_call(true);
  }
  Twin Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    Twin t;
    absl::Status s = MakeTwin(*cpu_, *gpu_, RandomVector(n, seed, lo, hi), &t);
    EXPECT_TRUE(s.ok()) << s;
    return t;
  }
  void Compare(const Twin& t, int64_t n, double rel, double abs, const std::string& what) {
    testing::ExpectTwinClose(*cpu_, *gpu_, t, n, rel, abs, what);
  }
  std::unique_ptr<kernels::CpuBackend> cpu_;
  std::unique_ptr<CudaBackend> gpu_;
};

TEST_F(CudaActivationTest, KeepGradForwardAndFromGradBackwardMatchCpu) {
  struct Shape {
    int rows, cols;
  };
  for (Shape s : {Shape{37, 129}, Shape{1000, 3}, Shape{1, 1}}) {
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu}) {
      for (bool with_bias : {true, false}) {
        const int64_t n = int64_t{s.rows} * s.cols;
        const std::string what = absl::StrCat("act ", static_cast<int>(act), " rows ", s.rows,
                                              " cols ", s.cols, " bias ", with_bias);
        Twin bias = Random(s.cols, 21), z = Random(n, 22, -6.0f, 6.0f), y = Random(n, 23);
        cpu_->BiasActivationForwardKeepGrad(act, s.rows, s.cols, with_bias ? bias.r() : nullptr,
                                            z.r(), y.r());
        gpu_->BiasActivationForwardKeepGrad(act, s.rows, s.cols, with_bias ? bias.d() : nullptr,
                                            z.d(), y.d());
        Compare(y, n, 1e-5, 1e-6, "forward y " + what);
        Compare(z, n, 1e-5, 2e-6, "forward act'(z) " + what);
        for (float beta : {0.0f, 1.0f}) {
          Twin dy = Random(n, 24), dz = Random(n, 25), dbias = Random(s.cols, 26);
          cpu_->BiasActivationBackwardFromGrad(s.rows, s.cols, z.r(), dy.r(), dz.r(), dbias.r(),
                                               beta);
          gpu_->BiasActivationBackwardFromGrad(s.rows, s.cols, z.d(), dy.d(), dz.d(), dbias.d(),
                                               beta);
          Compare(dz, n, 1e-5, 1e-6, absl::StrCat("backward dz beta ", beta, " ", what));
          Compare(dbias, s.cols, 1e-5, 1e-4, absl::StrCat("backward dbias beta ", beta, " ", what));
          // In place (dz == dy), as Linear calls it.
          cpu_->BiasActivationBackwardFromGrad(s.rows, s.cols, z.r(), dy.r(), dy.r(), nullptr,
                                               beta);
          gpu_->BiasActivationBackwardFromGrad(s.rows, s.cols, z.d(), dy.d(), dy.d(), nullptr,
                                               beta);
          Compare(dy, n, 1e-5, 1e-6, "in-place backward " + what);
        }
      }
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
