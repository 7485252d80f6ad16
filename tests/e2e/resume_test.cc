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
  return InterruptibleJobArgs(run_dir, samples, kSteps);
}

TEST(ResumeTest, InterruptedRunResumesFromItsCheckpointAndAFinishedOneSaysSo) {
  // 1. Ctrl-C (SIGINT to tandem local) once a checkpoint is committed;
  // 2. the same command again: resumes there.
  const ResumedRun r = InterruptAndResume("resumed", kSteps, Args);
  ASSERT_GT(r.committed, 0);
  ASSERT_EQ(r.second.exit_code, 0);

  // 3. Once more on the finished run: nothing starts.
  TandemRun third = RunTandem(Args(r.run_dir, r.second_samples));
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
