// `tandem doctor` and `tandem local --autotune` on a torchscript: job
// (issue 29, item 1), the example CNN on Fashion-MNIST with 2 workers:
//
//  - --doctor diagnoses the run from its processes' metrics (a verdict,
//    where the step time goes, the memory the model holds), and `tandem
//    doctor --run_dir` says the same later from the files;
//  - --autotune plans the module's gradient buckets from its own layout
//    (under 1 MiB of CNN gradient: one bucket at 1, 4, 25 and 100 MiB, so the
//    three non-default sizes are skipped), times allreduce, zero1 and zero2
//    with the module, chooses one, and the job trains with it.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr char kCnn[] = "--model=torchscript:common/torchscript/cnn.pt";

TEST(TorchScriptDoctor, DiagnosesATorchScriptRunThenAndLater) {
  const std::string run_dir = TmpPath("doctor");
  TandemRun r = RunTandem({"local", "--workers=2", kCnn, "--dataset=fashion-mnist",
                           "--batch-size=32", "--max-steps=30", "--log-every=1000",
                           "--checkpoint-every=0", "--doctor", "--run-dir=" + run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "verdict: ")) << r.stdout_text;
  TandemRun later = RunTandem({"doctor", "--run_dir=" + run_dir});
  ASSERT_EQ(later.exit_code, 0) << later.stderr_text;
  EXPECT_TRUE(absl::StrContains(later.stdout_text, "tandem doctor: 2 worker(s), 30 steps each"))
      << later.stdout_text;
  EXPECT_TRUE(absl::StrContains(later.stdout_text, "where step time goes (mean over workers): "
                                                   "forward "))
      << later.stdout_text;
  EXPECT_TRUE(absl::StrContains(later.stdout_text, "verdict: ")) << later.stdout_text;
  EXPECT_TRUE(absl::StrContains(later.stdout_text, "memory: each worker holds")) << later.stdout_text;
}

TEST(TorchScriptAutotune, PlansTheModulesBucketsTimesEachStrategyAndTrainsWithOne) {
  const std::string run_dir = TmpPath("autotune");
  TandemRun r = RunTandem({"local", "--autotune", "--autotune_steps=5", "--workers=2", kCnn,
                           "--dataset=fashion-mnist", "--batch-size=16", "--epochs=1",
                           "--max-steps=150", "--log-every=50", "--run-dir=" + run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  int skipped = 0, rows = 0, chosen = 0;
  for (absl::string_view line : absl::StrSplit(r.stdout_text, '\n')) {
    if (!absl::StartsWith(line, "autotune: ")) continue;
    if (absl::StartsWith(line, "autotune: skipped allreduce bucket_cap_mb=")) {
      // Counted from the module's layout (a failed count would say -1).
      EXPECT_TRUE(absl::StrContains(line, "(1 bucket(s)")) << line;
      ++skipped;
      continue;
    }
    for (const char* row : {"autotune: allreduce bucket_cap_mb=25 (default) ", "autotune: zero1 ",
                            "autotune: zero2 bucket_cap_mb=25 "}) {
      if (!absl::StartsWith(line, row)) continue;
      ++rows;
      EXPECT_FALSE(absl::StrContains(line, "failed")) << line;
      chosen += absl::EndsWith(line, "  <- chosen");
    }
  }
  EXPECT_EQ(skipped, 3) << r.stdout_text;
  EXPECT_EQ(rows, 3) << r.stdout_text;
  EXPECT_EQ(chosen, 1) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "autotune: training with --sync ")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "step 150/150")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "2 of 2 workers exited cleanly")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
