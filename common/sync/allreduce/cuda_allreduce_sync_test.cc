// On a GPU: one rank of AllreduceSync over an NcclCommunicator with the
// CudaDeviceStepper trains a tiny MLP on the CudaBackend for a few steps
// (clipping on, SGD with momentum and AdamW) and must end within 1e-4
// relative of the same run on the CPU backend with the host optimizer; the
// device state copied back by SaveState must match the host optimizer's.
// Also: two ranks (two backends and device steppers, one thread each)
// reduce the same gradients to the same norm and clip factor bit for bit.
// Skips without a device.
#include <cmath>
#include <cstring>
#include <thread>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/comm/nccl/nccl_communicator.h"
#include "common/kernels/cpu_backend.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "common/kernels/cuda/gpu_test_util.h"
#include "common/nn/model.h"
#include "common/optim/adamw.h"
#include "common/optim/cuda/cuda_device_stepper.h"
#include "common/optim/sgd.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/sync/grad_clip.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr char kSpec[] = "mlp:8,16,4";
constexpr int kBatch = 6;
constexpr int kSteps = 5;

// One rank: every collective is the identity.
class SoloComm final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend() const override { return "solo"; }
  absl::Status AllReduce(float*, int64_t, ReduceOp) override { return absl::OkStatus(); }
  absl::Status ReduceScatter(const float*, float*, int64_t) override {
    return absl::UnimplementedError("solo");
  }
  absl::Status AllGather(const void*, void*, int64_t) override {
    return absl::UnimplementedError("solo");
  }
  absl::Status Broadcast(void*, int64_t, int) override { return absl::OkStatus(); }
  absl::Status AllToAll(const void*, void*, int64_t) override {
    return absl::UnimplementedError("solo");
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

struct Data {
  std::vector<float> features;
  std::vector<int32_t> labels;
};

Data MakeData() {
  std::mt19937 rng(7);
  std::normal_distribution<float> x(0.f, 1.f);
  Data d;
  for (int i = 0; i < kSteps * kBatch * 8; ++i) d.features.push_back(x(rng));
  for (int i = 0; i < kSteps * kBatch; ++i) d.labels.push_back(static_cast<int32_t>(rng() % 4));
  return d;
}

std::unique_ptr<optim::Optimizer> MakeOptimizer(bool adamw, int64_t n) {
  if (adamw) {
    optim::AdamWOptions o;
    o.weight_decay = 0.01f;
    return std::move(optim::AdamW::Create({0, n}, o)).value();
  }
  optim::SgdOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 1e-4f;
  return std::move(optim::Sgd::Create({0, n}, o)).value();
}

optim::StepContext Ctx(int step) {
  optim::StepContext c;
  c.step = step;
  c.lr = 0.05f;
  return c;
}

// CPU reference: returns params and the optimizer state after kSteps.
void RunCpu(bool adamw, const Data& d, std::vector<float>* params,
            std::vector<std::vector<float>>* state, std::vector<float>* initial) {
  kernels::CpuBackend backend;
  nn::ModelOptions mo;
  mo.max_batch = kBatch;
  mo.seed = 3;
  auto model = std::move(nn::CreateModel(kSpec, &backend, mo)).value();
  TANDEM_ASSERT_OK(model->Initialize(3));
  const int64_t n = model->storage().size();
  initial->assign(model->storage().params(), model->storage().params() + n);
  SoloComm comm;
  AllreduceSyncOptions o;
  o.comm = &comm;
  o.params = model->storage().params();
  o.grads = model->storage().grads();
  o.size = n;
  for (const nn::GradRange& r : nn::GroupRanges(model->layout())) o.ready_ranges.push_back({r.lo, r.hi});
  o.optimizer = MakeOptimizer(adamw, n);
  optim::Optimizer* opt = o.optimizer.get();
  o.max_grad_norm = 0.5;
  auto sync = std::move(CreateAllreduceSync(std::move(o))).value();
  for (int s = 0; s < kSteps; ++s) {
    nn::Batch b;
    b.size = kBatch;
    b.features = d.features.data() + s * kBatch * 8;
    b.labels = d.labels.data() + s * kBatch;
    TANDEM_ASSERT_OK(model->Forward(b));
    TANDEM_ASSERT_OK(sync->BeginStep(StepOptions{}));
    TANDEM_ASSERT_OK(model->Backward(0.f, [&](const nn::GradRange& r) {
      sync->OnGradientsReady(r.lo, r.hi);
    }));
    TANDEM_ASSERT_OK(sync->FinishStep(Ctx(s + 1)));
  }
  params->assign(model->storage().params(), model->storage().params() + n);
  for (const optim::StateBuffer& b : opt->state()) {
    state->emplace_back(b.data.begin(), b.data.end());
  }
}

void ExpectRelClose(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.f, std::fabs(want[i])))
        << what << " [" << i << "]";
  }
}

void RunCase(bool adamw) {
  const Data d = MakeData();
  std::vector<float> want, initial;
  std::vector<std::vector<float>> want_state;
  RunCpu(adamw, d, &want, &want_state, &initial);

  kernels::BackendOptions bo;
  bo.device = "cuda";
  auto backend = std::move(cuda::CudaBackend::Create(bo)).value();
  nn::ModelOptions mo;
  mo.max_batch = kBatch;
  mo.seed = 3;
  auto model = std::move(nn::CreateModel(kSpec, backend.get(), mo)).value();
  const int64_t n = model->storage().size();
  ASSERT_EQ(n, static_cast<int64_t>(initial.size()));
  TANDEM_ASSERT_OK(
      backend->CopyToDevice(model->storage().params(), initial.data(), n * sizeof(float)));

  std::map<std::string, std::string> kv;
  NcclOptions no;
  no.kv.put = [&kv](const std::string& k, const std::string& v) {
    kv[k] = v;
    return absl::OkStatus();
  };
  no.kv.get = [&kv](const std::string& k, absl::Duration) -> absl::StatusOr<std::string> {
    auto it = kv.find(k);
    if (it == kv.end()) return absl::NotFoundError(k);
    return it->second;
  };
  no.prefix = "test/grad";
  no.wait_stream = backend->stream();
  no.timeout = absl::Seconds(30);
  auto comm = std::move(NcclCommunicator::Create(no)).value();

  std::unique_ptr<optim::Optimizer> host_opt = MakeOptimizer(adamw, n);
  optim::Optimizer* host = host_opt.get();
  auto stepper = std::move(optim::CudaDeviceStepper::Create(backend.get(), host)).value();
  TANDEM_ASSERT_OK(stepper->LoadState());
  AllreduceSyncOptions o;
  o.comm = comm.get();
  o.params = model->storage().params();
  o.grads = model->storage().grads();
  o.size = n;
  for (const nn::GradRange& r : nn::GroupRanges(model->layout())) o.ready_ranges.push_back({r.lo, r.hi});
  o.optimizer = std::move(host_opt);
  o.max_grad_norm = 0.5;
  o.device_stepper = stepper.get();
  auto sync = std::move(CreateAllreduceSync(std::move(o))).value();

  float* dev_x = static_cast<float*>(backend->AllocateRaw(kBatch * 8 * sizeof(float)).value());
  int32_t* dev_y = static_cast<int32_t*>(backend->AllocateRaw(kBatch * sizeof(int32_t)).value());
  for (int s = 0; s < kSteps; ++s) {
    TANDEM_ASSERT_OK(backend->CopyToDevice(dev_x, d.features.data() + s * kBatch * 8,
                                           kBatch * 8 * sizeof(float)));
    TANDEM_ASSERT_OK(
        backend->CopyToDevice(dev_y, d.labels.data() + s * kBatch, kBatch * sizeof(int32_t)));
    nn::Batch b;
    b.size = kBatch;
    b.features = dev_x;
    b.labels = dev_y;
    TANDEM_ASSERT_OK(model->Forward(b));
    TANDEM_ASSERT_OK(sync->BeginStep(StepOptions{}));
    TANDEM_ASSERT_OK(model->Backward(0.f, [&](const nn::GradRange& r) {
      sync->OnGradientsReady(r.lo, r.hi);
    }));
    TANDEM_ASSERT_OK(sync->FinishStep(Ctx(s + 1)));
  }
  std::vector<float> got(n);
  TANDEM_ASSERT_OK(backend->CopyToHost(got.data(), model->storage().params(), n * sizeof(float)));
  ExpectRelClose(got, want, adamw ? "adamw params" : "sgd params");
  // The run must have moved the parameters (the comparison is not vacuous).
  double moved = 0;
  for (int64_t i = 0; i < n; ++i) moved += std::fabs(got[i] - initial[i]);
  EXPECT_GT(moved, 1e-3);
  TANDEM_ASSERT_OK(stepper->SaveState());
  std::vector<optim::StateBuffer> st = host->state();
  ASSERT_EQ(st.size(), want_state.size());
  for (size_t i = 0; i < st.size(); ++i) {
    ExpectRelClose(std::vector<float>(st[i].data.begin(), st[i].data.end()), want_state[i],
                   st[i].name);
  }
  EXPECT_EQ(sync->stats().steps, kSteps);
  sync.reset();
  backend->Free(dev_x);
  backend->Free(dev_y);
}

// After the allreduce every rank holds the same gradients; the clip factor
// each computes from them must be the same bits, or the ranks' parameters
// drift apart. A reduction whose order varies (atomics) breaks this.
TEST(CudaAllreduceSyncTest, TwoRanksAgreeOnTheGradientNormBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  const int64_t n = (int64_t{1} << 23) + 12345;
  std::vector<float> grads(n);
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.f, 0.01f);
  for (float& v : grads) v = g(rng);
  constexpr int kRuns = 6;
  struct RankResult {
    absl::Status status;
    double sums[kRuns] = {};
    float scales[kRuns] = {};
  };
  RankResult results[2];
  auto rank = [&](RankResult* out) {
    auto be = cuda::CudaBackend::Create(kernels::BackendOptions());
    if (!be.ok()) {
      out->status = be.status();
      return;
    }
    std::unique_ptr<optim::Optimizer> host = MakeOptimizer(false, n);
    auto stepper = optim::CudaDeviceStepper::Create(be->get(), host.get());
    auto clip = GradClip::Create({0.5, nullptr});
    auto dev = (*be)->Allocate(n * sizeof(float));
    if (!stepper.ok() || !clip.ok() || !dev.ok()) {
      out->status = absl::InternalError("set-up failed");
      return;
    }
    out->status = (*be)->CopyToDevice(dev->data(), grads.data(), n * sizeof(float));
    for (int r = 0; r < kRuns && out->status.ok(); ++r) {
      absl::StatusOr<double> sum = (*stepper)->SumOfSquares(dev->f32(), n);
      if (!sum.ok()) {
        out->status = sum.status();
        break;
      }
      out->sums[r] = *sum;
      absl::StatusOr<optim::ClipResult> c = clip->Compute(*sum, 1.0 / 3.0);
      if (!c.ok()) {
        out->status = c.status();
        break;
      }
      out->scales[r] = c->scale;
    }
  };
  std::thread t0(rank, &results[0]);
  std::thread t1(rank, &results[1]);
  t0.join();
  t1.join();
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  ASSERT_TRUE(results[1].status.ok()) << results[1].status;
  double want = 0;
  for (float v : grads) want += static_cast<double>(v) * v;
  EXPECT_NEAR(results[0].sums[0], want, 1e-6 * want);
  EXPECT_LT(results[0].scales[0], 1.0f) << "the case must clip";
  for (int k = 0; k < 2; ++k) {
    for (int r = 0; r < kRuns; ++r) {
      EXPECT_EQ(std::memcmp(&results[k].sums[r], &results[0].sums[0], sizeof(double)), 0)
          << "rank " << k << " run " << r << ": " << results[k].sums[r] << " vs "
          << results[0].sums[0];
      EXPECT_EQ(std::memcmp(&results[k].scales[r], &results[0].scales[0], sizeof(float)), 0)
          << "rank " << k << " run " << r;
    }
  }
}

TEST(CudaAllreduceSyncTest, SgdMomentumMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  RunCase(false);
}

TEST(CudaAllreduceSyncTest, AdamWMatchesCpu) {
  TANDEM_SKIP_WITHOUT_GPU();
  RunCase(true);
}

}  // namespace
}  // namespace sync
}  // namespace tandem
