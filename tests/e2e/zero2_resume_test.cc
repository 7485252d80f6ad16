// `tandem local --sync zero2` with background checkpoints (the default,
// one shard file per rank written off the step) every 20 steps: Ctrl-C
// once the coordinator has recorded one, then the same command again
// resumes from that step (not 0), every sample of the epoch is trained on
// once over both runs (the workers' sample logs), and the resumed run
// ends where an uninterrupted run of the same job ends: the same loss at
// every logged step after the checkpoint and the same test accuracy.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/small_job.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSteps = 200;  // 20,000 samples of one epoch

std::vector<std::string> Args(const std::string& run_dir, const std::string& samples) {
  std::vector<std::string> args = SmallJobArgs(run_dir, samples, kSteps, /*checkpoint_every=*/20);
  args.push_back("--sync=zero2");
  // At least 10 ms a batch: the interrupt lands long before the last step.
  args.push_back("--simulate_slow_data_ms=10");
  return args;
}

// Step -> the loss field of its progress line ("step 40/200 epoch 1 loss
// 0.5321 ..."), for every progress line in `out`.
std::map<int, std::string> LoggedLosses(const std::string& out) {
  std::map<int, std::string> losses;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "step ")) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    int step = 0;
    if (f.size() < 6 || f[4] != "loss") continue;
    if (!absl::SimpleAtoi(f[1].substr(0, f[1].find('/')), &step)) continue;
    losses[step] = std::string(f[5]);
  }
  return losses;
}

TEST(Zero2ResumeTest, InterruptedAfterABackgroundCheckpointResumesAndEndsAsAnUninterruptedRun) {
  const std::string run_dir = TmpPath("zero2-resumed");
  const std::string first_samples = MakeTmpDir("zero2-samples-1");
  const std::string second_samples = MakeTmpDir("zero2-samples-2");

  // 1. Ctrl-C once a checkpoint is committed (the coordinator's record).
  bool interrupted = false;
  TandemRun first =
      RunTandem(Args(run_dir, first_samples), InterruptOnceCommitted(run_dir, &interrupted));
  ASSERT_TRUE(interrupted) << first.stdout_text << first.stderr_text;
  ASSERT_EQ(first.exit_code, 130) << first.stdout_text << first.stderr_text;
  const int64_t committed = CommittedStep(run_dir);
  ASSERT_GT(committed, 0);
  ASSERT_LT(committed, kSteps) << "the run finished before the interrupt took effect";
  ASSERT_EQ(committed % 20, 0) << committed;

  // 2. The same command again resumes there and finishes.
  TandemRun second = RunTandem(Args(run_dir, second_samples));
  ASSERT_EQ(second.exit_code, 0) << second.stdout_text << second.stderr_text;
  EXPECT_TRUE(absl::StrContains(second.stdout_text,
                                absl::StrCat("tandem local: resuming from step ", committed,
                                             " of the interrupted run in ", run_dir)))
      << second.stdout_text;
  EXPECT_TRUE(absl::StrContains(second.stdout_text, absl::StrCat(" at step ", committed, " ")))
      << "rank 0 did not resume from the checkpoint:\n" << second.stdout_text;
  EXPECT_TRUE(absl::StrContains(second.stdout_text, absl::StrCat("step ", kSteps, "/", kSteps)))
      << second.stdout_text;
  const SampleCoverage c = CountSamples({first_samples, second_samples});
  EXPECT_EQ(c.distinct, kSteps * kSmallJobSamplesPerStep) << "samples lost";
  EXPECT_EQ(c.repeated, 0);

  // 3. The same job uninterrupted: zero2's reduce-scatter and sharded
  // update are deterministic, so the resumed run's numbers are its numbers.
  const std::string whole_dir = TmpPath("zero2-whole");
  TandemRun whole = RunTandem(Args(whole_dir, MakeTmpDir("zero2-samples-whole")));
  ASSERT_EQ(whole.exit_code, 0) << whole.stdout_text << whole.stderr_text;
  const std::map<int, std::string> resumed = LoggedLosses(second.stdout_text);
  const std::map<int, std::string> reference = LoggedLosses(whole.stdout_text);
  ASSERT_EQ(resumed.count(kSteps), 1u) << second.stdout_text;
  int compared = 0;
  for (const auto& [step, loss] : resumed) {
    auto it = reference.find(step);
    if (step <= committed || it == reference.end()) continue;
    EXPECT_EQ(loss, it->second) << "step " << step;
    ++compared;
  }
  EXPECT_GT(compared, 0) << second.stdout_text;
  const std::string accuracy = ReadFile(whole_dir + "/result");
  ASSERT_TRUE(absl::StrContains(accuracy, "test accuracy")) << accuracy;
  EXPECT_EQ(ReadFile(run_dir + "/result"), accuracy);
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
