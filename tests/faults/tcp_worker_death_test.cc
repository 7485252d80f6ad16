// A worker killed (SIGKILL) under Gloo TCP on one host (`tandem local
// --transport=gloo`: what --nodes and multi-host jobs use; no shared-memory
// pid check). The coordinator confirms the death from the dead process's
// closed Coordinator.Attach call, so the survivors re-form at once from
// their own memory — without waiting --settle-seconds (30 s here, longer
// than the survivors' 15 s --rejoin_timeout_seconds: waiting for it would
// fail the run) and without missed heartbeats. The coordinator's log says
// how the death was confirmed.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(TcpWorkerDeathTest, SurvivorsResumeFromMemoryWithoutTheSettleWait) {
  const std::string run_dir = TmpPath("tcp-death");
  const std::vector<std::string> args = {
      "local", "--workers=3", "--min-workers=2", "--keep-going", "--transport=gloo",
      "--model=mlp:784,128,10", "--epochs=1", "--max-steps=60", "--log-every=10",
      "--checkpoint-every=10",
      // The first generation forms when all 3 joined (max_workers); after
      // the kill only a confirmed death lets 2 form before this.
      "--settle-seconds=30", "--worker-arg=--rejoin_timeout_seconds=15",
      "--run-dir=" + run_dir};
  bool killed = false;
  bool world2_after_kill = false;
  TandemRun r = RunTandem(args, [&](const std::string& line) {
    if (!killed && absl::StartsWith(line, "step 20/")) {
      const int pid = ReadPid(run_dir, "worker-2");
      ASSERT_GT(pid, 0);
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed = true;
    }
    if (killed && absl::StartsWith(line, "step ") && absl::StrContains(line, " world 2 ")) {
      world2_after_kill = true;
    }
  });
  ASSERT_TRUE(killed) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(world2_after_kill) << r.stdout_text;
  // From the survivors' own memory, not the checkpoint.
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "recovered from memory at step ")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, " (0 steps redone)")) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "resumed from")) << r.stdout_text;
  const std::string log = ReadFile(run_dir + "/coordinator.log");
  EXPECT_TRUE(absl::StrContains(
      log, "(worker-2) exited (confirmed: its connection to the coordinator closed"))
      << log;
  EXPECT_FALSE(absl::StrContains(log, "(worker-2) missed")) << log;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
