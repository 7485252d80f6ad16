// The fused CUDA optimizer kernels against the CPU optimizers of
// common/optim (the reference), over several steps with fresh gradients,
// an odd size and every SGD variant. The kernels follow the documented
// order of operations with explicitly rounded arithmetic, so they should
// match bit for bit; the assertion allows fp32 rounding (1e-6 relative) and
// the test prints how many elements matched exactly. Skips without a device.
#include "common/kernels/cuda/optimizer_kernels.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kernels/cuda/cuda_status.h"
#include "common/kernels/cuda/gpu_test_util.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cuda {
namespace {

using testing::ExpectAllClose;
using testing::RandomVector;

// A device copy of a host vector; freed on destruction.
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<float>& host) : n_(host.size()) {
    status_ = CudaStatus(cudaMalloc(&ptr_, n_ * sizeof(float) + 4), "malloc");
    if (status_.ok()) {
      status_ = CudaStatus(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float),
                                      cudaMemcpyHostToDevice),
                           "upload");
    }
  }
  ~DeviceVector() { cudaFree(ptr_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;

  float* get() const { return static_cast<float*>(ptr_); }
  const absl::Status& status() const { return status_; }
  absl::Status Upload(const std::vector<float>& host) {
    return CudaStatus(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float),
                                 cudaMemcpyHostToDevice),
                      "upload");
  }
  std::vector<float> Download() const {
    std::vector<float> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, n_ * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  void* ptr_ = nullptr;
  absl::Status status_;
};

int64_t ExactMatches(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same += std::memcmp(&a[i], &b[i], sizeof(float)) == 0;
  }
  return same;
}

void CompareState(const std::vector<float>& got, absl::Span<const float> want,
                  const std::string& what) {
  std::vector<float> w(want.begin(), want.end());
  ExpectAllClose(got, w, 1e-6, 1e-7, what);
  std::printf("%s: %lld of %zu bit-identical\n", what.c_str(),
              static_cast<long long>(ExactMatches(got, w)), got.size());
}

constexpr int64_t kN = 100003;
constexpr int kSteps = 5;

TEST(OptimizerKernelsTest, SgdVariantsMatchCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  struct Variant {
    float momentum;
    bool nesterov;
    float weight_decay;
  };
  for (Variant v : {Variant{0.0f, false, 0.0f}, Variant{0.9f, false, 1e-2f},
                    Variant{0.9f, true, 0.0f}, Variant{0.5f, true, 5e-4f}}) {
    const std::string what =
        absl::StrCat("sgd mu=", v.momentum, " nesterov=", v.nesterov,
                     " wd=", v.weight_decay);
    optim::SgdOptions options;
    options.momentum = v.momentum;
    options.nesterov = v.nesterov;
    options.weight_decay = v.weight_decay;
    absl::StatusOr<std::unique_ptr<optim::Sgd>> cpu =
        optim::Sgd::Create(optim::ParamRange{0, kN}, options);
    ASSERT_TRUE(cpu.ok()) << cpu.status();

    std::vector<float> params = RandomVector(kN, 1);
    DeviceVector d_params(params);
    DeviceVector d_grads(std::vector<float>(kN, 0.0f));
    DeviceVector d_buf(std::vector<float>(kN, 0.0f));
    TANDEM_ASSERT_OK(d_params.status());
    TANDEM_ASSERT_OK(d_grads.status());
    TANDEM_ASSERT_OK(d_buf.status());

    for (int step = 1; step <= kSteps; ++step) {
      const std::vector<float> grads = RandomVector(kN, 100 + step);
      optim::StepContext ctx;
      ctx.step = step;
      ctx.lr = 0.1f;
      ctx.grad_scale = 0.5f;
      TANDEM_ASSERT_OK((*cpu)->Step(params.data(), grads.data(), kN, ctx));

      TANDEM_ASSERT_OK(d_grads.Upload(grads));
      SgdStepArgs args;
      args.lr = ctx.lr;
      args.momentum = v.momentum;
      args.nesterov = v.nesterov;
      args.weight_decay = v.weight_decay;
      args.grad_scale = ctx.grad_scale;
      ASSERT_EQ(LaunchSgdStep(kN, args, d_params.get(), d_grads.get(),
                              d_buf.get(), nullptr),
                cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    CompareState(d_params.Download(), params, what + " params");
    if (v.momentum != 0.0f) {
      CompareState(d_buf.Download(), (*cpu)->state()[0].data,
                   what + " momentum_buffer");
    }
  }
}

TEST(OptimizerKernelsTest, AdamWMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  optim::AdamWOptions options;
  options.weight_decay = 0.05f;
  absl::StatusOr<std::unique_ptr<optim::AdamW>> cpu =
      optim::AdamW::Create(optim::ParamRange{0, kN}, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  std::vector<float> params = RandomVector(kN, 2);
  DeviceVector d_params(params);
  DeviceVector d_grads(std::vector<float>(kN, 0.0f));
  DeviceVector d_m(std::vector<float>(kN, 0.0f));
  DeviceVector d_v(std::vector<float>(kN, 0.0f));
  TANDEM_ASSERT_OK(d_params.status());
  TANDEM_ASSERT_OK(d_m.status());
  TANDEM_ASSERT_OK(d_v.status());

  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<float> grads = RandomVector(kN, 200 + step, -3.0f, 3.0f);
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = 1e-3f;
    ctx.grad_scale = 0.25f;
    TANDEM_ASSERT_OK((*cpu)->Step(params.data(), grads.data(), kN, ctx));

    TANDEM_ASSERT_OK(d_grads.Upload(grads));
    const optim::AdamWScalars s =
        optim::ComputeAdamWScalars(options, ctx.step, ctx.lr);
    AdamWStepArgs args;
    args.beta1 = options.beta1;
    args.beta2 = options.beta2;
    args.eps = options.eps;
    args.grad_scale = ctx.grad_scale;
    args.decay = s.decay;
    args.step_size = s.step_size;
    args.inv_sqrt_bc2 = s.inv_sqrt_bc2;
    args.one_minus_beta1 = s.one_minus_beta1;
    args.one_minus_beta2 = s.one_minus_beta2;
    ASSERT_EQ(LaunchAdamWStep(kN, args, d_params.get(), d_grads.get(),
                              d_m.get(), d_v.get(), nullptr),
              cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  CompareState(d_params.Download(), params, "adamw params");
  std::vector<optim::StateBuffer> state = (*cpu)->state();
  for (const optim::StateBuffer& b : state) {
    const std::vector<float> got =
        b.name == "exp_avg" ? d_m.Download() : d_v.Download();
    CompareState(got, b.data, "adamw " + b.name);
  }
}

TEST(OptimizerKernelsTest, MomentumWithoutBufferIsRefused) {
  TANDEM_SKIP_WITHOUT_GPU();
  SgdStepArgs args;
  args.momentum = 0.9f;
  EXPECT_EQ(LaunchSgdStep(10, args, nullptr, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace cuda
}  // namespace tandem
