// End to end: `tandem local --workers 4` trains the MLP on
// Fashion-MNIST for 2 epochs as separate processes (coordinator, data
// server, 4 workers over Gloo) and reaches >= 85% test accuracy.
#include <signal.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(TandemLocalTest, FourWorkersReach85PercentTestAccuracyInTwoEpochs) {
  const std::string run_dir = TmpPath("run");
  double accuracy[3] = {-1, -1, -1};
  int progress_lines = 0;
  TandemRun r = RunTandem(
      {"local", "--workers", "4", "--model", "mlp:784,1024,1024,10", "--dataset",
       "fashion-mnist", "--epochs", "2", "--batch-size", "64", "--lr", "0.05", "--optimizer",
       "sgd", "--run-dir", run_dir},
      [&](const std::string& line) {
        if (absl::StartsWith(line, "step ")) {
          ++progress_lines;
          EXPECT_TRUE(absl::StrContains(line, " world 4 ")) << line;
          EXPECT_TRUE(absl::StrContains(line, " samples/s ")) << line;
          EXPECT_TRUE(absl::StrContains(line, " eta ")) << line;
        }
        // "epoch 2 test accuracy 0.8612 (10000 samples)"
        std::vector<std::string> w = absl::StrSplit(line, ' ');
        int epoch = 0;
        if (w.size() >= 5 && w[0] == "epoch" && w[2] == "test" && w[3] == "accuracy" &&
            absl::SimpleAtoi(w[1], &epoch) && epoch >= 1 && epoch <= 2) {
          ASSERT_TRUE(absl::SimpleAtod(w[4], &accuracy[epoch])) << line;
        }
      });
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_GT(progress_lines, 5) << r.stdout_text;
  EXPECT_GT(accuracy[1], 0.5) << r.stdout_text;
  EXPECT_GE(accuracy[2], 0.85) << r.stdout_text;
  ::testing::Test::RecordProperty("test_accuracy_epoch2", std::to_string(accuracy[2]));
  for (const char* name : {"coordinator", "dataserver", "worker-0", "worker-1", "worker-2",
                           "worker-3"}) {
    EXPECT_TRUE(absl::StrContains(r.stdout_text, std::string("metrics: ") + name + " http://"))
        << name << "\n" << r.stdout_text;
    const int pid = ReadPid(run_dir, name);
    ASSERT_GT(pid, 0) << name;
    EXPECT_NE(kill(pid, 0), 0) << name << " still running";
  }
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "job finished")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
