// Elastic scale-up: a job started with 2 workers and room for 3
// (`tandem local --max_workers 3`) gets a third from `tandem add-worker
// --run_dir` mid-epoch. The coordinator admits it and ends the generation at
// the next step boundary; the next generation runs with world 3 (the
// progress lines say so, and the LR follows --lr_scaling linear: 0.05 x
// 100/50 at world 2, x 150/50 at world 3); the job finishes; and what the
// final model trained on (the workers' --sample_log_dir, rolled-back steps
// not counted) is every sample of each epoch exactly once. The new worker
// receives the state from rank 0 at the step boundary where the job grew
// (recovery from memory: 0 steps redone, no checkpoint read); the new
// generation resumes at that step's sample position, which need not be a
// multiple of world 3's global batch of 150: the cursor is a sample offset,
// not a batch index.
#include <signal.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace e2e {
namespace {

TEST(ScaleUpTest, AThirdWorkerJoinsMidEpochAndEverySampleIsSeenOnce) {
  const std::string run_dir = TmpPath("scale-up");
  const std::string samples = TmpPath("scale-up-samples");
  ASSERT_EQ(mkdir(samples.c_str(), 0755), 0);
  std::unique_ptr<cli::Subprocess> adder;
  bool world2 = false, world3 = false, lr2 = false, lr3 = false, room = false;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--max-workers=3", "--model=mlp:784,256,256,10", "--epochs=3",
       "--batch-size=50", "--log-every=10", "--checkpoint-every=7", "--schedule=constant",
       "--lr=0.05", "--lr-scaling=linear", "--worker-arg=--sample_log_dir=" + samples,
       "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (absl::StrContains(line, "tandem add-worker --run_dir")) room = true;
        const bool progress = absl::StartsWith(line, "step ");
        if (progress && absl::StrContains(line, " world 2 ")) {
          world2 = true;
          lr2 = lr2 || absl::StrContains(line, " lr 0.1000 ");
        }
        if (progress && absl::StrContains(line, " world 3 ")) {
          world3 = true;
          lr3 = lr3 || absl::StrContains(line, " lr 0.1500 ");
        }
        if (adder == nullptr && absl::StartsWith(line, "step 20/")) {
          auto p = StartAddWorker(run_dir, TmpPath("add-worker.log"));
          ASSERT_TRUE(p.ok()) << p.status();
          adder = std::move(*p);
        }
      });
  ASSERT_NE(adder, nullptr) << r.stdout_text << r.stderr_text;
  ASSERT_TRUE(adder->WaitFor(absl::Seconds(120)));
  const std::string adder_log = ReadFile(TmpPath("add-worker.log"));
  EXPECT_TRUE(adder->succeeded()) << adder->DescribeExit() << "\n" << adder_log;
  EXPECT_TRUE(absl::StrContains(adder_log, "started worker-2")) << adder_log;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(room) << r.stdout_text;
  EXPECT_TRUE(world2) << r.stdout_text;
  EXPECT_TRUE(world3) << "the third worker never trained:\n" << r.stdout_text;
  EXPECT_TRUE(lr2 && lr3) << "LR not rescaled for the new world:\n" << r.stdout_text;
  // The new worker got the state from the running ranks: nothing redone,
  // no disk checkpoint read.
  EXPECT_TRUE(absl::StrContains(r.stdout_text, " (0 steps redone)")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "state sent from rank 0 to 1 rank(s)"))
      << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "resumed from")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(ReadFile(run_dir + "/coordinator.log"),
                                "worker-2 joined; growing the job"));
  // The summary counts the added worker (it said "2 of 2" for a world of 3).
  EXPECT_TRUE(absl::StrContains(
      r.stdout_text, "3 of 3 workers exited cleanly (1 added with tandem add-worker)"))
      << r.stdout_text;

  std::vector<worker::SampleRecord> records;
  for (int w = 0; w < 3; ++w) {
    absl::Status s =
        worker::ReadSampleLog(absl::StrCat(samples, "/worker-", w, ".samples"), &records);
    ASSERT_TRUE(s.ok()) << s;
  }
  bool third_trained = false;
  for (const worker::SampleRecord& rec : records) third_trained |= rec.generation >= 2;
  EXPECT_TRUE(third_trained);
  const auto counts = worker::EffectiveSampleCounts(records);
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [epoch, ids] : counts) {
    int repeated = 0;
    for (const auto& [id, n] : ids) repeated += n - 1;
    EXPECT_EQ(ids.size(), 60000u) << "epoch " << epoch << ": samples lost";
    EXPECT_EQ(repeated, 0) << "epoch " << epoch;
  }
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
