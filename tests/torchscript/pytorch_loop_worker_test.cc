// One tandem worker (a real `tandem local --workers 1` job: coordinator,
// data server, worker process) trains the example CNN with BatchNorm for 20
// SGD-momentum steps (its --smooth variant: GELU and average pooling. With
// ReLU and max-pooling on real images, the 1-ulp differences between
// tandem's fused SGD update and torch's flip a max-pool tie at step 19 and
// the runs part at 5e-3; up to then the per-step losses agree to 5 digits); a plain PyTorch loop (common/torchscript/testdata/
// pytorch_loop.py, run here with /usr/bin/python3) on the same archive, the
// same initial weights and the same batches (the sample ids the worker logged
// with --sample_log_dir, the pixels scaled as the data server scales them)
// ends within 1e-5 (relative) of the worker's final checkpoint.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/data/idx.h"
#include "common/kernels/cpu_backend.h"
#include "common/torchscript/pytorch_reference_testutil.h"
#include "common/torchscript/torchscript_model.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSteps = 20;
constexpr int kBatch = 16;
constexpr char kModule[] = "common/torchscript/cnn_smooth.pt";

template <typename T>
void WriteRaw(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

TEST(PyTorchLoopTest, OneWorkerEqualsAPlainPyTorchLoopAfter20Steps) {
  const std::string run_dir = TmpPath("loop");
  const std::string log_dir = TmpPath("loop-samples");
  ASSERT_EQ(mkdir(log_dir.c_str(), 0755), 0);
  TandemRun r = RunTandem({"local", "--workers=1", absl::StrCat("--model=torchscript:", kModule),
                           "--dataset=fashion-mnist", absl::StrCat("--max-steps=", kSteps),
                           absl::StrCat("--batch-size=", kBatch), "--optimizer=sgd", "--lr=0.05",
                           "--momentum=0.9", "--lr-scaling=none", "--schedule=constant",
                           "--log-every=10", "--worker-arg=--sample_log_dir=" + log_dir,
                           "--run-dir=" + run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;

  // The batches the worker trained on, in order.
  std::vector<worker::SampleRecord> records;
  ASSERT_TRUE(worker::ReadSampleLog(log_dir + "/worker-0.samples", &records).ok());
  ASSERT_EQ(records.size(), static_cast<size_t>(kSteps));
  auto images = data::ReadIdxFile("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
  auto labels = data::ReadIdxFile("/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
  ASSERT_TRUE(images.ok() && labels.ok());
  std::vector<float> x;
  std::vector<int32_t> y;
  for (int s = 0; s < kSteps; ++s) {
    ASSERT_EQ(records[s].step, s + 1);
    ASSERT_EQ(records[s].ids.size(), static_cast<size_t>(kBatch));
    for (int64_t id : records[s].ids) {
      for (int e = 0; e < 784; ++e) {
        x.push_back(images->data[id * 784 + e] * (1.0f / 255.0f));  // as the data server
      }
      y.push_back(labels->data[id]);
    }
  }
  const std::string xf = TmpPath("loop.x"), yf = TmpPath("loop.y"), out = TmpPath("loop.params");
  WriteRaw(xf, x);
  WriteRaw(yf, y);
  const std::string cmd = absl::StrCat(
      "/usr/bin/python3 common/torchscript/testdata/pytorch_loop.py --module ", kModule,
      " --features ", xf, " --labels ", yf, " --sample 784 --batch ", kBatch, " --steps ", kSteps,
      " --optimizer sgd --lr 0.05 --momentum 0.9 --out ", out);
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << cmd;

  // The worker's final parameters, and PyTorch's in the same flat layout.
  auto c = checkpoint::ReadWholeCheckpoint(
      absl::StrCat(run_dir, "/checkpoints/step-000000", kSteps, ".tckpt"), {});
  ASSERT_TRUE(c.ok()) << c.status();
  kernels::CpuBackend be;
  nn::ModelSpec spec;
  spec.kind = nn::ModelSpec::Kind::kTorchScript;
  spec.torchscript.path = kModule;
  nn::ModelOptions mo;
  mo.sample.shape = {784};
  mo.sample.num_classes = 10;
  auto model = torchscript::TorchScriptModel::Create(spec, &be, mo);
  ASSERT_TRUE(model.ok()) << model.status();
  const tensor::ParameterLayout& layout = (*model)->layout();
  ASSERT_EQ(c->params.size(), static_cast<size_t>(layout.total_size()));
  const std::vector<float> initial((*model)->storage().params(),
                                   (*model)->storage().params() + layout.total_size());
  const std::vector<float> reference = torchscript_testing::ReadPyTorchParams(out, layout);
  ASSERT_EQ(reference.size(), initial.size());
  double moved = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    moved = std::max(moved, std::fabs(double{reference[i]} - initial[i]));
  }
  const double relative = torchscript_testing::RelativeDistance(c->params, reference);
  std::printf("worker vs PyTorch after %d steps: relative %.3g (training moved up to %.3g)\n",
              kSteps, relative, moved);
  EXPECT_GT(moved, 1e-2);
  EXPECT_LE(relative, 1e-5);
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
