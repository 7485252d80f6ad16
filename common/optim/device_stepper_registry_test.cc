// DeviceStepperFactoryFor: empty for host memory, the registered stepper
// for a device backend, an UNIMPLEMENTED factory for a device backend with
// none. The device backends here are fakes that only have a name.
#include "common/optim/device_stepper_registry.h"

#include <cstdlib>
#include <memory>

#include "common/kernels/cpu_backend.h"
#include "gtest/gtest.h"

namespace tandem {
namespace optim {
namespace {

using kernels::Activation;
using kernels::Transpose;

// A device backend that only has a name; no kernel may be called.
class NamedDeviceBackend final : public kernels::Backend {
 public:
  explicit NamedDeviceBackend(const char* name) : name_(name) {}
  const char* name() const override { return name_; }
  bool host_accessible() const override { return false; }
  absl::Status Synchronize() override { std::abort(); }
  absl::StatusOr<void*> AllocateRaw(size_t bytes) override { std::abort(); }
  void Free(void* ptr) override { std::abort(); }
  absl::Status CopyToDevice(void* dst, const void* host_src, size_t bytes) override {
    std::abort();
  }
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override { std::abort(); }
  void Copy(void* dst, const void* src, size_t bytes) override { std::abort(); }
  void Fill(float* x, int64_t n, float value) override { std::abort(); }
  void Gemm(Transpose ta, Transpose tb, int m, int n, int k, float alpha, const float* a, int lda,
            const float* b, int ldb, float beta, float* c, int ldc) override {
    std::abort();
  }
  void GemmStridedBatched(Transpose ta, Transpose tb, int m, int n, int k, float alpha,
                          const float* a, int lda, int64_t stride_a, const float* b, int ldb,
                          int64_t stride_b, float beta, float* c, int ldc, int64_t stride_c,
                          int batch) override {
    std::abort();
  }
  void BiasActivationForward(Activation act, int rows, int cols, const float* bias, float* z,
                             float* y) override {
    std::abort();
  }
  void BiasActivationBackward(Activation act, int rows, int cols, const float* z, const float* dy,
                              float* dz, float* dbias, float dbias_beta) override {
    std::abort();
  }
  void BiasActivationForwardKeepGrad(Activation act, int rows, int cols, const float* bias,
                                     float* z, float* y) override {
    std::abort();
  }
  void BiasActivationBackwardFromGrad(int rows, int cols, const float* act_grad,
                                      const float* dy, float* dz, float* dbias,
                                      float dbias_beta) override {
    std::abort();
  }
  void ActivationForward(Activation act, int64_t n, const float* x, float* y) override {
    std::abort();
  }
  void ActivationBackward(Activation act, int64_t n, const float* x, const float* dy,
                          float* dx) override {
    std::abort();
  }
  void BiasGrad(int rows, int cols, const float* dy, float beta, float* dbias) override {
    std::abort();
  }
  void LayerNormForward(int rows, int cols, float eps, const float* x, const float* gamma,
                        const float* beta_param, float* y, float* mean, float* rstd) override {
    std::abort();
  }
  void LayerNormBackward(int rows, int cols, const float* x, const float* gamma, const float* mean,
                         const float* rstd, const float* dy, float* dx, float* dgamma,
                         float* dbeta_param, float grad_beta) override {
    std::abort();
  }
  void SoftmaxCrossEntropyForward(int rows, int classes, const float* logits, const int32_t* labels,
                                  float scale, float* probs, float* loss) override {
    std::abort();
  }
  void SoftmaxCrossEntropyBackward(int rows, int classes, const float* probs, const int32_t* labels,
                                   float scale, float* dlogits) override {
    std::abort();
  }
  void ArgmaxRows(int rows, int cols, const float* x, int32_t* out) override { std::abort(); }
  void EmbeddingForward(int batch, int seq, int dim, const int32_t* ids, const float* token_table,
                        const float* pos_table, float* out) override {
    std::abort();
  }
  void EmbeddingBackward(int batch, int seq, int dim, const int32_t* ids, const float* dout,
                         float* dtoken, float* dpos) override {
    std::abort();
  }
  void SplitHeads(int batch, int seq, int n, int heads, int head_dim, const float* x,
                  float* out) override {
    std::abort();
  }
  void MergeHeads(int batch, int seq, int n, int heads, int head_dim, const float* x,
                  float* out) override {
    std::abort();
  }
  void CausalSoftmaxForward(int batch, int seq, float scale, const float* scores,
                            float* probs) override {
    std::abort();
  }
  void CausalSoftmaxBackward(int batch, int seq, float scale, const float* probs,
                             const float* dprobs, float* dscores) override {
    std::abort();
  }
  void Axpy(int64_t n, float alpha, const float* x, float* y) override { std::abort(); }
  void Add(int64_t n, const float* a, const float* b, float* out) override { std::abort(); }
  void Scale(int64_t n, float alpha, float* x) override { std::abort(); }
  void SumSquares(int64_t n, const float* x, float* result) override { std::abort(); }
  void CountNonFinite(int64_t n, const float* x, float* result) override { std::abort(); }
  void CastF32ToBf16(int64_t n, const float* x, uint16_t* y) override { std::abort(); }
  void CastBf16ToF32(int64_t n, const uint16_t* x, float* y) override { std::abort(); }
  void CastF32ToF16(int64_t n, const float* x, uint16_t* y) override { std::abort(); }
  void CastF16ToF32(int64_t n, const uint16_t* x, float* y) override { std::abort(); }

 private:
  const char* name_;
};

class RecordingStepper final : public DeviceStepper {
 public:
  RecordingStepper(kernels::Backend* backend, optim::Optimizer* host)
      : backend(backend), host(host) {}
  absl::StatusOr<double> SumOfSquares(const float*, int64_t) override { return 0.0; }
  absl::Status Step(float*, const float*, int64_t, const optim::StepContext&) override {
    return absl::OkStatus();
  }
  absl::Status LoadState() override { return absl::OkStatus(); }
  absl::Status SaveState() override { return absl::OkStatus(); }
  kernels::Backend* backend;
  optim::Optimizer* host;
};

const bool kRegistered = RegisterDeviceStepper(
    "fakedev",
    [](kernels::Backend* b,
       optim::Optimizer* host) -> absl::StatusOr<std::unique_ptr<DeviceStepper>> {
      return std::unique_ptr<DeviceStepper>(new RecordingStepper(b, host));
    });

TEST(DeviceStepperRegistry, HostBackendNeedsNoStepper) {
  kernels::CpuBackend cpu;
  EXPECT_FALSE(static_cast<bool>(DeviceStepperFactoryFor(&cpu)));
  EXPECT_FALSE(static_cast<bool>(DeviceStepperFactoryFor(nullptr)));
}

TEST(DeviceStepperRegistry, RegisteredDeviceBackendGetsItsStepper) {
  ASSERT_TRUE(kRegistered);
  NamedDeviceBackend dev("fakedev");
  DeviceStepperFactory factory = DeviceStepperFactoryFor(&dev);
  ASSERT_TRUE(static_cast<bool>(factory));
  optim::Optimizer* host = reinterpret_cast<optim::Optimizer*>(0x1000);  // never dereferenced
  absl::StatusOr<std::unique_ptr<DeviceStepper>> s = factory(host);
  ASSERT_TRUE(s.ok()) << s.status();
  auto* rec = static_cast<RecordingStepper*>(s->get());
  EXPECT_EQ(rec->backend, &dev);
  EXPECT_EQ(rec->host, host);
}

TEST(DeviceStepperRegistry, UnregisteredDeviceBackendIsUnimplementedNotACrash) {
  NamedDeviceBackend dev("tpu");
  DeviceStepperFactory factory = DeviceStepperFactoryFor(&dev);
  ASSERT_TRUE(static_cast<bool>(factory));
  absl::StatusOr<std::unique_ptr<DeviceStepper>> s = factory(nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.status().message().find("backend 'tpu'"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("registered: fakedev"), std::string::npos) << s.status();
}

TEST(DeviceStepperRegistryDeathTest, RegisteringABackendTwiceAborts) {
  EXPECT_DEATH(RegisterDeviceStepper("fakedev",
                                     [](kernels::Backend*, optim::Optimizer*)
                                         -> absl::StatusOr<std::unique_ptr<DeviceStepper>> {
                                       return absl::UnimplementedError("");
                                     }),
               "registered twice");
}

}  // namespace
}  // namespace optim
}  // namespace tandem
