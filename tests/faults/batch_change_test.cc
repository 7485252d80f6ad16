// Dynamic batch sizing across a change mid-epoch: `tandem local
// --batch_schedule 150:150,300:64` with 2 workers of 50 switches the global
// batch 100 -> 150 after step 150 and 150 -> 64 after step 300, in place (one
// generation, no checkpoint reload), each time at the exact sample reached:
// the second switch lands at sample 37,500, no multiple of 64, and the rest
// of the epoch (22,500 = 351 x 64 + 36) ends with a short batch. The LR
// follows --lr_scaling linear (0.05 x 100/50, x 150/50, x 64/50), and what
// the workers trained on (--sample_log_dir) is every sample exactly once.
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(BatchChangeTest, ScheduledChangesMidEpochSeeEverySampleOnce) {
  const std::string run_dir = TmpPath("batch-change");
  const std::string samples = TmpPath("batch-change-samples");
  ASSERT_EQ(mkdir(samples.c_str(), 0755), 0);
  std::map<std::string, bool> seen;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--model=mlp:784,128,10", "--epochs=1", "--batch-size=50",
       "--batch-schedule=150:150,300:64", "--log-every=50", "--checkpoint-every=0",
       "--schedule=constant", "--lr=0.05", "--lr-scaling=linear",
       "--worker-arg=--sample_log_dir=" + samples, "--run-dir=" + run_dir},
      [&](const std::string& line) {
        for (const char* want :
             {" lr 0.1000 ", " lr 0.1500 ", " lr 0.0640 ", " batch 100 world 2 ",
              " batch 150 world 2 ", " batch 64 world 2 ", "step 652/652"}) {
          if (absl::StartsWith(line, "step ") && absl::StrContains(line, want)) seen[want] = true;
        }
      });
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  for (const char* want :
       {" lr 0.1000 ", " lr 0.1500 ", " lr 0.0640 ", " batch 100 world 2 ", " batch 150 world 2 ",
        " batch 64 world 2 ", "step 652/652"}) {
    EXPECT_TRUE(seen[want]) << "no progress line with '" << want << "':\n" << r.stdout_text;
  }
  EXPECT_TRUE(absl::StrContains(r.stdout_text,
                                "batch 100 -> 150 at step 150 (epoch 1, sample 15000)"))
      << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text,
                                "batch 150 -> 64 at step 300 (epoch 1, sample 37500)"))
      << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "re-joining")) << r.stdout_text;

  std::vector<worker::SampleRecord> records;
  for (int w = 0; w < 2; ++w) {
    absl::Status s =
        worker::ReadSampleLog(absl::StrCat(samples, "/worker-", w, ".samples"), &records);
    ASSERT_TRUE(s.ok()) << s;
  }
  for (const worker::SampleRecord& rec : records) ASSERT_EQ(rec.generation, 1);
  const auto counts = worker::EffectiveSampleCounts(records);
  ASSERT_EQ(counts.size(), 1u);
  const std::map<int64_t, int>& epoch = counts.begin()->second;
  int repeated = 0;
  for (const auto& [id, n] : epoch) repeated += n - 1;
  EXPECT_EQ(epoch.size(), 60000u) << "samples lost";
  EXPECT_EQ(repeated, 0);
}

// --batch auto: the workers measure the gradient norms at both batch sizes
// (progress lines have the window's noise scale), the coordinator's
// controller gets them (its saved metrics hold a positive noise scale and a
// chosen batch in range), and whatever it decides and whenever the workers
// switch, every sample of each epoch is trained on exactly once.
TEST(BatchChangeTest, AutoMeasuresTheNoiseScaleAndLosesNoSample) {
  const std::string run_dir = TmpPath("batch-auto");
  const std::string samples = TmpPath("batch-auto-samples");
  ASSERT_EQ(mkdir(samples.c_str(), 0755), 0);
  int noise_lines = 0, progress_lines = 0;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--model=mlp:784,128,10", "--epochs=2", "--batch-size=32",
       "--batch=auto:64,512", "--log-every=20", "--checkpoint-every=0",
       "--worker-arg=--sample_log_dir=" + samples, "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (!absl::StartsWith(line, "step ")) return;
        ++progress_lines;
        if (absl::StrContains(line, " noise ")) ++noise_lines;
      });
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_GT(progress_lines, 10);
  // A window whose |G|^2 estimate is not positive (late, small gradients
  // under noise) prints none; most do.
  EXPECT_GT(noise_lines, progress_lines / 2) << r.stdout_text;
  const std::string metrics = ReadFile(run_dir + "/metrics/coordinator.prom");
  auto gauge = [&](const std::string& name) {
    const size_t at = metrics.find("\n" + name + "{");
    if (at == std::string::npos) return -1.0;
    const size_t value = metrics.find("} ", at);
    return std::stod(metrics.substr(value + 2));
  };
  EXPECT_GT(gauge("tandem_batch_noise_scale"), 0) << metrics;
  EXPECT_GE(gauge("tandem_batch_global_size"), 64) << metrics;
  EXPECT_LE(gauge("tandem_batch_global_size"), 512) << metrics;

  std::vector<worker::SampleRecord> records;
  for (int w = 0; w < 2; ++w) {
    absl::Status s =
        worker::ReadSampleLog(absl::StrCat(samples, "/worker-", w, ".samples"), &records);
    ASSERT_TRUE(s.ok()) << s;
  }
  const auto counts = worker::EffectiveSampleCounts(records);
  ASSERT_EQ(counts.size(), 2u);
  for (const auto& [epoch, ids] : counts) {
    int repeated = 0;
    for (const auto& [id, n] : ids) repeated += n - 1;
    // 60,000 = 937 x 64 + 32: an epoch at the start batch drops its last
    // 32; one entered mid-epoch after a change keeps its short tail.
    EXPECT_GE(ids.size(), 60000u - 32) << "epoch " << epoch;
    EXPECT_EQ(repeated, 0) << "epoch " << epoch;
  }
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
