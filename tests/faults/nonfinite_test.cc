// Non-finite gradients on `tandem local` (issue: NaN / Inf handling).
//  1. fp16 with an inf injected into rank 1's gradients at step 4: every
//     rank skips step 4 (rank 0 says so on the console, naming the layer
//     and the loss scale halving), each worker's metrics count one skipped
//     step and the same final loss scale, and the job finishes.
//  2. Injected at steps 3, 4 and 5 with --max_nonfinite_steps=3: the job
//     stops with an error naming the layer, non-zero exit, no hang.
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

// The value of the first sample of `series` in a Prometheus text file, or
// "" when absent.
std::string SampleValue(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series, at)) != std::string::npos) {
    const bool line_start = at == 0 || text[at - 1] == '\n';
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    at += series.size();
    if (!line_start) continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    return line.substr(space + 1);
  }
  return "";
}

TEST(NonFiniteTest, Fp16OverflowOnOneRankIsSkippedByEveryRankAndHalvesTheScale) {
  const std::string run_dir = TmpPath("nonfinite_fp16");
  TandemRun r = RunTandem({"local", "--workers=2", "--model=mlp:784,64,10", "--epochs=1",
                           "--max-steps=12", "--log-every=4", "--run-dir=" + run_dir,
                           "--worker_arg=--precision=fp16",
                           // A scale the MLP's gradients never overflow at, so the
                           // injected inf is the only skip.
                           "--worker_arg=--loss_scale=1024",
                           "--worker_arg=--inject_nonfinite=4@1"});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(
      r.stdout_text,
      "step 4 skipped: non-finite gradients (first in layer fc1); loss scale 1024 -> 512"))
      << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "step 3 skipped")) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "step 5 skipped")) << r.stdout_text;
  for (int w = 0; w < 2; ++w) {
    const std::string prom = ReadFile(absl::StrCat(run_dir, "/metrics/worker-", w, ".prom"));
    ASSERT_FALSE(prom.empty()) << "worker " << w;
    EXPECT_EQ(std::atof(SampleValue(prom, "tandem_skipped_steps_total").c_str()), 1.0) << prom;
    EXPECT_EQ(std::atof(SampleValue(prom, "tandem_loss_scale").c_str()), 512.0) << prom;
  }
}

TEST(NonFiniteTest, SkipsInARowStopTheJobNamingTheLayer) {
  const std::string run_dir = TmpPath("nonfinite_stop");
  TandemRun r = RunTandem({"local", "--workers=2", "--model=mlp:784,64,10", "--epochs=1",
                           "--max-steps=40", "--log-every=10", "--run-dir=" + run_dir,
                           "--worker_arg=--inject_nonfinite=3@0:4@1:5",
                           "--worker_arg=--max_nonfinite_steps=3"});
  EXPECT_NE(r.exit_code, 0) << r.stdout_text;
  const std::string all = r.stdout_text + r.stderr_text;
  EXPECT_TRUE(absl::StrContains(all, "3 steps in a row had non-finite (inf / NaN) gradients, "
                                     "first in layer fc1"))
      << all;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "step 3 skipped")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
