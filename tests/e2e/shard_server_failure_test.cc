// A shard server process killed (SIGKILL) mid-run under `tandem local
// --keep-going --sync hybrid --shard-servers 1`: tandem starts it again on
// its port (empty), the workers' step fails (the server no longer holds the
// generation: ABORTED), they re-join, resume from the last committed
// checkpoint (parameters and the servers' optimizer state, which the
// checkpoint carries) and finish both epochs; tandem exits 0. With one
// server there is no replica (shard_server_replica_test has two): rank 0
// logs that the disk is the way back.
#include <signal.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(ShardServerFailureTest, AKilledServerIsRestartedAndTheJobFinishes) {
  const std::string run_dir = TmpPath("shard-kill");
  bool killed = false;
  bool stepped_after_resume = false;
  bool resumed = false;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--shard-servers=1", "--sync=hybrid", "--keep-going",
       "--model=mlp:784,64,10", "--epochs=2", "--log-every=25", "--checkpoint-every=50",
       "--sync-opt=chunk_mb=0.05,timeout_s=20", "--run-dir=" + run_dir},
      [&](const std::string& line) {
        // Between checkpoints (step 175 of every-50): a server lost while
        // a checkpoint is written is not handled yet: the checkpointer's
        // other ranks exit with "rank 0 could not write its shard".
        if (!killed && absl::StartsWith(line, "step 175/")) {
          const int pid = ReadPid(run_dir, "shard-0");
          ASSERT_GT(pid, 0);
          ASSERT_EQ(kill(pid, SIGKILL), 0);
          killed = true;
        }
        if (killed && absl::StartsWith(line, "resumed from")) resumed = true;
        if (resumed && absl::StartsWith(line, "step ")) stepped_after_resume = true;
      });
  ASSERT_TRUE(killed) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "shard-0 (pid ")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "killed by signal 9")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "restarting it on")) << r.stdout_text;
  EXPECT_TRUE(resumed) << r.stdout_text;
  EXPECT_TRUE(stepped_after_resume) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "epoch 2 test accuracy")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "2 of 2 workers exited cleanly")) << r.stdout_text;
  // The restarted server (same name, same log, same port) was initialised
  // again by the new generation.
  const std::string log = ReadFile(run_dir + "/shard-0.log");
  EXPECT_TRUE(absl::StrContains(log, "generation 2")) << log;
  EXPECT_TRUE(absl::StrContains(log, "optimizer state as sent")) << log;
  const std::string worker = ReadFile(run_dir + "/worker-0.log");
  EXPECT_TRUE(absl::StrContains(worker, "shard servers keep no replicas")) << worker;
  // Said when the job starts, too.
  EXPECT_TRUE(absl::StrContains(worker, "hybrid: one shard server, so no replica")) << worker;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
