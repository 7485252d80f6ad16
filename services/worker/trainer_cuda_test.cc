// On a GPU (CUDA builds): one worker with --backend=cuda trains a small MLP
// end to end (real coordinator and data server, NCCL gradient mesh through
// the coordinator's KV store, device optimizer step, a checkpoint staged
// through the host) and must end within 1e-4 relative of the same job on
// --backend=cpu, for SGD with momentum and clipping and for AdamW. Skips
// without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
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

struct Outcome {
  absl::StatusOr<TrainResult> result = absl::UnknownError("not run");
  std::vector<float> params;
};

Outcome TrainOnce(dataserver::DataServer* data, const std::string& backend,
                  const std::string& optimizer, const std::string& dir) {
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
    cudaDeviceSynchronize();
    cudaMemcpy(out.params.data(), s.params(), s.size() * sizeof(float), cudaMemcpyDeviceToHost);
  } else {
    out.params.assign(s.params(), s.params() + s.size());
  }
  return out;
}

class TrainerCudaTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainerCudaTest, CudaWorkerMatchesCpuWorker) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  dataserver::DataServerOptions d;
  d.datasets = {{"fashion-mnist/train", "/usr/share/datasets/fashion-mnist/train"}};
  auto data = dataserver::DataServer::Start(d);
  ASSERT_TRUE(data.ok()) << data.status();
  const std::string tmp = std::getenv("TEST_TMPDIR");
  Outcome cpu = TrainOnce(data->get(), "cpu", GetParam(), tmp + "/cpu-" + GetParam());
  Outcome gpu = TrainOnce(data->get(), "cuda", GetParam(), tmp + "/cuda-" + GetParam());
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

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainerCudaTest, ::testing::Values("sgd", "adamw"));

}  // namespace
}  // namespace worker
}  // namespace tandem
