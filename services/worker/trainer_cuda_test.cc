// On a GPU (CUDA builds): one worker with --backend=cuda trains a small MLP
// end to end (real coordinator and data server, NCCL gradient mesh through
// the coordinator's KV store, device optimizer step, a checkpoint staged
// through the host) and must end within 1e-4 relative of the same job on
// --backend=cpu, for SGD with momentum and clipping and for AdamW, under
// allreduce, zero1 and zero2. The data
// is a small synthetic IDX set written to TEST_TMPDIR (the GPU machine has no
// /usr/share/datasets). Also: the BatchStager's device path (copies staged
// through pinned memory, returning before the device has them) keeps every
// batch intact in stream order. Skips without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/data/idx.h"
#include "common/kernels/cuda/cuda_backend.h"
#include "gtest/gtest.h"
#include "services/worker/batch_stager.h"
#include "services/coordinator/coordinator_server.h"
#include "services/dataserver/data_server.h"
#include "services/worker/trainer.h"

namespace tandem {
namespace worker {
namespace {

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// A Fashion-MNIST-shaped IDX pair (28x28 u8 images, labels 0..9) at
// <prefix>-{images-idx3,labels-idx1}-ubyte.gz: n samples whose pixels depend
// on the label, so the model has something to learn. Deterministic.
absl::Status WriteSyntheticIdx(const std::string& prefix, int n) {
  data::IdxArray images, labels;
  images.dims = {n, 28, 28};
  labels.dims = {n};
  uint32_t state = 12345;
  for (int i = 0; i < n; ++i) {
    const int label = i % 10;
    labels.data.push_back(static_cast<uint8_t>(label));
    for (int p = 0; p < 28 * 28; ++p) {
      state = state * 1664525u + 1013904223u;
      const int bright = (p % 10 == label) ? 160 : 0;
      images.data.push_back(static_cast<uint8_t>(bright + (state >> 26)));
    }
  }
  absl::Status s = data::WriteIdxFile(prefix + "-images-idx3-ubyte.gz", images);
  if (!s.ok()) return s;
  return data::WriteIdxFile(prefix + "-labels-idx1-ubyte.gz", labels);
}

struct Outcome {
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  std::vector<float> params;
};

Outcome TrainOnce(dataserver::DataServer* data, const std::string& backend,
                  const std::string& optimizer, const std::string& strategy,
                  const std::string& dir) {
  CoordinatorServerOptions co;
  co.coordinator.job_id = "cuda-test";
  co.coordinator.min_workers = 1;
  co.coordinator.max_workers = 1;
  co.coordinator.settle_time = absl::ZeroDuration();
  co.coordinator.heartbeat_period = absl::Milliseconds(50);
  co.run_liveness_thread = false;
  auto coord = CoordinatorServer::Start(co);
  Outcome out;
  if (!coord.ok()) {
    out.result = coord.status();
    return out;
  }
  TrainerOptions o;
  o.coordinator = absl::StrCat("127.0.0.1:", (*coord)->port());
  o.data_servers = {data->address()};
  o.job_id = "cuda-test";
  o.worker_id = "w0";
  o.model = "mlp:784,32,10";
  o.batch_size = 32;
  o.optimizer = optimizer;
  o.lr = optimizer == "adamw" ? 0.001 : 0.05;
  o.sync.strategy = strategy;
  o.sync.max_grad_norm = 1.0;
  o.schedule = "constant";
  o.max_steps = 10;
  o.eval_dataset = "";
  o.log_every = 0;
  o.backend = backend;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 5;
  o.progress = [](const std::string&) {};
  auto t = Trainer::Create(o);
  if (!t.ok()) {
    out.result = t.status();
    return out;
  }
  out.result = (*t)->Run();
  tensor::FlatStorage& s = (*t)->model().storage();
  out.params.resize(s.size());
  if (backend == "cuda") {
    // The trainer's backend stream is non-blocking: wait for the whole device
    // before a legacy-stream copy, and check both.
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) {
      e = cudaMemcpy(out.params.data(), s.params(), s.size() * sizeof(float),
                     cudaMemcpyDeviceToHost);
    }
    if (e != cudaSuccess) {
      out.result = absl::InternalError(absl::StrCat("reading the device parameters: ",
                                                    cudaGetErrorString(e)));
    }
  } else {
    out.params.assign(s.params(), s.params() + s.size());
  }
  return out;
}

// (optimizer, strategy): allreduce and the zero1 / zero2 device path (one
// rank: the owned shard is the whole vector, but the in-place allreduce,
// the device-stepped shard and the in-place gather all run on NCCL).
class TrainerCudaTest
    : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(TrainerCudaTest, CudaWorkerMatchesCpuWorker) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  const auto [optimizer, strategy] = GetParam();
  const char* tmp_env = std::getenv("TEST_TMPDIR");
  const std::string tmp = tmp_env != nullptr ? tmp_env : "/tmp";
  const std::string tag = absl::StrCat(optimizer, "-", strategy);
  const std::string prefix = tmp + "/synthetic-" + tag + "-train";
  ASSERT_TRUE(WriteSyntheticIdx(prefix, 640).ok());
  dataserver::DataServerOptions d;
  d.datasets = {{"fashion-mnist/train", prefix}};
  auto data = dataserver::DataServer::Start(d);
  ASSERT_TRUE(data.ok()) << data.status();
  Outcome cpu = TrainOnce(data->get(), "cpu", optimizer, strategy, tmp + "/cpu-" + tag);
  Outcome gpu = TrainOnce(data->get(), "cuda", optimizer, strategy, tmp + "/cuda-" + tag);
  ASSERT_TRUE(cpu.result.ok()) << cpu.result.status();
  ASSERT_TRUE(gpu.result.ok()) << gpu.result.status();
  EXPECT_EQ(cpu.result->transport != "nccl", true);
  EXPECT_EQ(gpu.result->transport, "nccl");
  EXPECT_EQ(gpu.result->steps, 10);
  ASSERT_EQ(cpu.params.size(), gpu.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    ASSERT_NEAR(gpu.params[i], cpu.params[i], 1e-4 * std::max(1.f, std::fabs(cpu.params[i])))
        << "parameter " << i;
  }
  // The final checkpoint holds the device parameters, staged through the host.
  auto c = checkpoint::ReadCheckpoint(gpu.result->last_checkpoint, {});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->params.size(), gpu.params.size());
  EXPECT_TRUE(std::equal(gpu.params.begin(), gpu.params.end(), c->params.begin()));
}

INSTANTIATE_TEST_SUITE_P(OptimizersAndStrategies, TrainerCudaTest,
                         ::testing::Combine(::testing::Values("sgd", "adamw"),
                                            ::testing::Values("allreduce", "zero1", "zero2")));

data::HostBatch FeatureBatch(int n, int width, float base) {
  data::HostBatch b;
  b.feature_dtype = v1::DTYPE_F32;
  b.label_dtype = v1::DTYPE_I32;
  std::vector<float> f(static_cast<size_t>(n) * width);
  for (size_t i = 0; i < f.size(); ++i) f[i] = base + static_cast<float>(i);
  std::vector<int32_t> l(n);
  for (int i = 0; i < n; ++i) l[i] = static_cast<int32_t>(base) + i;
  b.features.assign(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
  b.labels.assign(reinterpret_cast<const char*>(l.data()), l.size() * sizeof(int32_t));
  for (int i = 0; i < n; ++i) b.sample_ids.push_back(i);
  return b;
}

// Stage returns before the device has the bytes (CopyToDevice is staged
// through pinned memory and not waited for). Each staged batch must still be
// what the kernels queued after it read, even when the next Stage reuses the
// same host buffer and the same device buffers at once, with the stream kept
// busy so the copies really are pending.
TEST(BatchStagerCudaTest, StagedBatchesStayIntactInStreamOrder) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  auto be = cuda::CudaBackend::Create(kernels::BackendOptions());
  ASSERT_TRUE(be.ok()) << be.status();
  cuda::CudaBackend& gpu = **be;
  const int width = 4096, n = 64, kBatches = 6;
  auto stager = BatchStager::Create(&gpu, InputSpec{InputSpec::Kind::kFeatures, width, 1}, n);
  ASSERT_TRUE(stager.ok()) << stager.status();
  auto busy = gpu.Allocate(size_t{128} << 20);
  auto snap_x = gpu.Allocate(size_t{kBatches} * n * width * sizeof(float));
  auto snap_y = gpu.Allocate(size_t{kBatches} * n * sizeof(int32_t));
  ASSERT_TRUE(busy.ok() && snap_x.ok() && snap_y.ok());
  data::HostBatch host;  // one host batch object, overwritten each time
  for (int k = 0; k < kBatches; ++k) {
    for (int i = 0; i < 10; ++i) gpu.Fill(busy->f32(), (int64_t{128} << 20) / 4, 1.0f);
    host = FeatureBatch(n, width, 1000.0f * k);
    auto b = (*stager)->Stage(host);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->size, n);
    EXPECT_EQ(std::memcmp((*stager)->host_labels(), host.labels.data(), n * sizeof(int32_t)), 0);
    gpu.Copy(snap_x->f32() + size_t{k} * n * width, b->features, size_t{n} * width * 4);
    gpu.Copy(snap_y->i32() + k * n, b->labels, n * sizeof(int32_t));
  }
  ASSERT_TRUE(gpu.Synchronize().ok());
  std::vector<float> x(size_t{kBatches} * n * width);
  std::vector<int32_t> y(size_t{kBatches} * n);
  ASSERT_TRUE(gpu.CopyToHost(x.data(), snap_x->data(), x.size() * 4).ok());
  ASSERT_TRUE(gpu.CopyToHost(y.data(), snap_y->data(), y.size() * 4).ok());
  for (int k = 0; k < kBatches; ++k) {
    const data::HostBatch want = FeatureBatch(n, width, 1000.0f * k);
    EXPECT_EQ(std::memcmp(x.data() + size_t{k} * n * width, want.features.data(),
                          want.features.size()),
              0)
        << "features of batch " << k;
    EXPECT_EQ(std::memcmp(y.data() + k * n, want.labels.data(), want.labels.size()), 0)
        << "labels of batch " << k;
  }
}

}  // namespace
}  // namespace worker
}  // namespace tandem
