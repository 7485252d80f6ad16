// The coordinator killed (SIGKILL) mid-run under `tandem local`: it is
// restarted on its port from its state directory and resumes the running
// generation, so the workers never re-join (heartbeats and checkpoint
// commits ride out the gap with retries) and the job ends exactly as an
// undisturbed run of the same seed does: same loss at every progress line.
// A second run kills it twice with --max_restarts=1: the second death is a
// clear final error, not a restart loop.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

std::vector<std::string> Args(const std::string& run_dir) {
  return {"local",
          "--workers=3",
          "--model=mlp:784,128,10",
          "--epochs=1",
          "--max-steps=80",
          "--log-every=10",
          "--checkpoint-every=10",
          "--run-dir=" + run_dir};
}

// "step 30/80 epoch 1 loss 0.8366" of every progress line: what training
// computed, without the timings.
std::vector<std::string> LossLines(const std::string& out) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "step ")) continue;
    const size_t lr = line.find(" lr ");
    lines.emplace_back(line.substr(0, lr));
  }
  return lines;
}

TEST(CoordinatorRestartTest, WorkersTrainOnAndTheResultMatchesAnUndisturbedRun) {
  const TandemRun calm = RunTandem(Args(TmpPath("calm")));
  ASSERT_EQ(calm.exit_code, 0) << calm.stdout_text << calm.stderr_text;

  const std::string run_dir = TmpPath("restarted");
  int killed = -1;
  bool back = false;
  TandemRun r = RunTandem(Args(run_dir), [&](const std::string& line) {
    if (killed < 0 && absl::StartsWith(line, "step 20/")) {
      killed = ReadPid(run_dir, "coordinator");
      ASSERT_GT(killed, 0);
      ASSERT_EQ(kill(killed, SIGKILL), 0);
    }
    if (absl::StrContains(line, "coordinator is back")) back = true;
  });
  ASSERT_GT(killed, 0) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "coordinator (pid " + std::to_string(killed) +
                                                   ") killed by signal 9"))
      << r.stdout_text;
  EXPECT_TRUE(back) << r.stdout_text;
  // Same generation throughout: no re-join, no roll-back to a checkpoint.
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "resumed from")) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "re-joining")) << r.stdout_text;
  const std::string log = ReadFile(run_dir + "/coordinator.log");
  EXPECT_TRUE(absl::StrContains(log, "in running generation 1 with 3 worker(s)")) << log;
  EXPECT_FALSE(absl::StrContains(log, "generation 2 formed")) << log;
  // The same training, step for step.
  const std::vector<std::string> want = LossLines(calm.stdout_text);
  ASSERT_EQ(want.size(), 8u) << calm.stdout_text;
  EXPECT_EQ(LossLines(r.stdout_text), want) << r.stdout_text << "\nundisturbed:\n"
                                            << calm.stdout_text;
}

TEST(CoordinatorRestartTest, RestartsUsedUpIsAClearFinalError) {
  const std::string run_dir = TmpPath("used-up");
  std::vector<int> killed;
  std::vector<std::string> args = Args(run_dir);
  args.push_back("--max-restarts=1");
  TandemRun r = RunTandem(args, [&](const std::string& line) {
    // Kill the first coordinator at step 20, the restarted one once it is back.
    const bool first = killed.empty() && absl::StartsWith(line, "step 20/");
    const bool second = killed.size() == 1 && absl::StrContains(line, "coordinator is back");
    if (first || second) {
      const int pid = ReadPid(run_dir, "coordinator");
      ASSERT_GT(pid, 0);
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed.push_back(pid);
    }
  });
  ASSERT_EQ(killed.size(), 2u) << r.stdout_text << r.stderr_text;
  EXPECT_NE(killed[0], killed[1]);
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "coordinator (pid " + std::to_string(killed[1])))
      << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "all 1 restart(s) of --max_restarts are used up"))
      << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "(restart 1 of 1)")) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "(restart 2 of")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
