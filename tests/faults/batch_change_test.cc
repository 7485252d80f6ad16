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

}  // namespace
}  // namespace e2e
}  // namespace tandem
