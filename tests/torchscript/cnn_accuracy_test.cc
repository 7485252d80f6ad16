// End to end (issue 29): `tandem local --workers 4` trains the example CNN
// (examples/cnn_fashion_mnist.py: Conv2d, BatchNorm, max-pool; scripted at
// build time) on Fashion-MNIST for 2 epochs as separate processes and
// reaches >= 90% test accuracy (evaluated with BatchNorm's running
// statistics, which rank 0 carries). About 40 s on 2 cores.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(TorchScriptCnnTest, FourWorkersReach90PercentTestAccuracyInTwoEpochs) {
  const std::string run_dir = TmpPath("cnn");
  double accuracy[3] = {-1, -1, -1};
  TandemRun r = RunTandem(
      {"local", "--workers=4", "--model=torchscript:common/torchscript/cnn.pt",
       "--dataset=fashion-mnist", "--epochs=2", "--batch-size=32", "--optimizer=adamw",
       "--lr=0.002", "--lr-scaling=none", "--log-every=200", "--run-dir=" + run_dir},
      [&](const std::string& line) {
        // "epoch 2 test accuracy 0.9054 (10000 samples)"
        std::vector<std::string> w = absl::StrSplit(line, ' ');
        int epoch = 0;
        if (w.size() >= 5 && w[0] == "epoch" && w[2] == "test" && absl::SimpleAtoi(w[1], &epoch) &&
            epoch >= 1 && epoch <= 2) {
          ASSERT_TRUE(absl::SimpleAtod(w[4], &accuracy[epoch])) << line;
        }
      });
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_GT(accuracy[1], 0.8) << r.stdout_text;
  EXPECT_GE(accuracy[2], 0.90) << r.stdout_text;
  ::testing::Test::RecordProperty("test_accuracy_epoch2", std::to_string(accuracy[2]));
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "4 of 4 workers exited cleanly")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
