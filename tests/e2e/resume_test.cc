// A user's first hour (issue 28): `tandem local --run_dir D`, Ctrl-C after a
// committed checkpoint, then the same command again resumes from that
// checkpoint and its data cursor (every sample of the job trained on once,
// counted from the workers' sample logs across both runs) and says so in
// one line; the same command on the finished D says it finished, with the
// final accuracy, and starts nothing. A second `tandem local` on a run
// directory in use is refused (exit 2) naming the first's pid, and the
// first run's files are untouched.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/small_job.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSteps = 200;  // 20,000 samples of one epoch

std::vector<std::string> Args(const std::string& run_dir, const std::string& samples) {
  std::vector<std::string> args = SmallJobArgs(run_dir, samples, kSteps, /*checkpoint_every=*/20);
  // At least 10 ms a batch (2 s for the job): the interrupt lands long
  // before the last step, however fast this machine steps the model.
  args.push_back("--simulate_slow_data_ms=10");
  return args;
}

TEST(ResumeTest, InterruptedRunResumesFromItsCheckpointAndAFinishedOneSaysSo) {
  const std::string run_dir = TmpPath("resumed");
  const std::string first_samples = MakeTmpDir("samples-1");
  const std::string second_samples = MakeTmpDir("samples-2");

  // 1. Ctrl-C (SIGINT to tandem local) once a checkpoint is committed.
  bool interrupted = false;
  TandemRun first =
      RunTandem(Args(run_dir, first_samples), InterruptOnceCommitted(run_dir, &interrupted));
  ASSERT_TRUE(interrupted) << first.stdout_text << first.stderr_text;
  ASSERT_EQ(first.exit_code, 130) << first.stdout_text << first.stderr_text;
  const int64_t committed = CommittedStep(run_dir);
  ASSERT_GT(committed, 0);
  ASSERT_LT(committed, kSteps) << "the run finished before the interrupt took effect";

  // 2. The same command again: resumes there.
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
  EXPECT_FALSE(absl::StrContains(second.stdout_text + second.stderr_text, "join refused"))
      << second.stdout_text << second.stderr_text;
  // What the final model trained on, over both runs: each sample once.
  const SampleCoverage c = CountSamples({first_samples, second_samples});
  EXPECT_EQ(c.distinct, kSteps * kSmallJobSamplesPerStep) << "samples lost";
  EXPECT_EQ(c.repeated, 0);

  // 3. Once more on the finished run: nothing starts.
  TandemRun third = RunTandem(Args(run_dir, second_samples));
  EXPECT_EQ(third.exit_code, 0) << third.stdout_text << third.stderr_text;
  EXPECT_TRUE(absl::StrContains(third.stdout_text, "has already finished")) << third.stdout_text;
  EXPECT_TRUE(absl::StrContains(third.stdout_text, "pass another --run_dir")) << third.stdout_text;
  EXPECT_FALSE(absl::StrContains(third.stdout_text, "coordinator: ")) << third.stdout_text;
}

TEST(RunDirLockTest, ASecondRunOnTheSameDirectoryIsRefusedAndTouchesNothing) {
  const std::string run_dir = TmpPath("shared");
  const std::string samples = MakeTmpDir("samples-shared");
  std::string token_before, token_after;
  TandemRun refused;
  int holder = -1;
  TandemRun first = RunTandem(Args(run_dir, samples), [&](const std::string& line) {
    if (holder > 0 || !absl::StartsWith(line, "step ")) return;
    holder = ReadLockHolder(run_dir);
    token_before = ReadFile(run_dir + "/token");
    refused = RunTandem(Args(run_dir, samples));
    token_after = ReadFile(run_dir + "/token");
  });
  ASSERT_GT(holder, 0) << first.stdout_text;
  EXPECT_EQ(first.exit_code, 0) << first.stdout_text << first.stderr_text;
  EXPECT_EQ(refused.exit_code, 2) << refused.stdout_text << refused.stderr_text;
  EXPECT_TRUE(absl::StrContains(refused.stderr_text,
                                absl::StrCat("is in use by another tandem local (pid ", holder, ")")))
      << refused.stderr_text;
  EXPECT_EQ(refused.stdout_text, "") << "the refused run printed something";
  ASSERT_FALSE(token_before.empty());
  EXPECT_EQ(token_after, token_before) << "the refused run overwrote the first run's token";
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
