// A worker process killed (SIGKILL) mid-run under `tandem local --keep-going`.
// The worker implements re-join, so:
//  - with --min-workers below the world size, the coordinator ends the
//    generation, the survivors re-join as a world of 3, continue from their
//    own memory at the last step all of them completed (0 steps redone; the
//    disk checkpoint is not read) and finish (tandem exits 0, the dead worker is
//    reported as lost); under zero1, whose ranks hold only their shard, from
//    the peer replicas (--replica_every, 5 by default: at most 5 redone);
//  - with --min-workers equal to the world size, the survivors cannot form a
//    new generation and stop cleanly (bounded by --rejoin_timeout_seconds,
//    no hang) with an error naming the failed generation, their rank, the
//    collective that failed and the lost rank ("rank 3 (worker-3) exited":
//    a survivor saw its process gone and reported it, so nobody waited for
//    its heartbeats); tandem exits non-zero naming a worker.
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

std::vector<std::string> Args(const std::string& run_dir, int min_workers) {
  return {"local", "--workers=4", absl::StrCat("--min-workers=", min_workers), "--keep-going",
          "--model=mlp:784,256,10", "--epochs=2", "--log-every=10", "--checkpoint-every=10",
          // 1 s heartbeats: the coordinator would notice the silence after
          // 3 s, but a survivor's shm collective sees the process gone
          // first and reports it at once (naming the lost rank).
          "--heartbeat-ms=1000", "--worker-arg=--rejoin_timeout_seconds=5",
          // Wait for all 4 before the first generation forms: on a loaded
          // machine it could form with 2 and grow, and the worker killed at
          // step 20 might never have been a member.
          "--settle-seconds=3",
          "--run-dir=" + run_dir};
}

TEST(WorkerFailureTest, SurvivorsRejoinAsThreeAndFinish) {
  const std::string run_dir = TmpPath("recover");
  bool killed = false;
  bool world3_after_kill = false;
  TandemRun r = RunTandem(Args(run_dir, 2), [&](const std::string& line) {
    if (!killed && absl::StartsWith(line, "step 20/")) {
      const int pid = ReadPid(run_dir, "worker-3");
      ASSERT_GT(pid, 0);
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed = true;
    }
    if (killed && absl::StartsWith(line, "step ") && absl::StrContains(line, " world 3 ")) {
      world3_after_kill = true;
    }
  });
  ASSERT_TRUE(killed) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(world3_after_kill) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "with 3 worker(s)")) << r.stdout_text;
  // allreduce keeps every rank's state whole: the survivors continue from
  // their memory, not from the checkpoint (docs/architecture.md).
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "recovered from memory at step ")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, " (0 steps redone)")) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "resumed from")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "epoch 2 test accuracy")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "worker-3 killed by signal 9")) << r.stdout_text;
  // The coordinator ended the generation naming the lost rank (on a loaded
  // machine the first generation may form with 2 and grow before the kill).
  const std::string coordinator_log = ReadFile(run_dir + "/coordinator.log");
  EXPECT_TRUE(absl::StrContains(coordinator_log, " ended: rank ")) << coordinator_log;
  EXPECT_TRUE(absl::StrContains(coordinator_log, "(worker-3) exited")) << coordinator_log;
  // ... from a survivor's report, before any heartbeat was missed: the
  // generation that ended was never judged by its silence.
  EXPECT_FALSE(absl::StrContains(coordinator_log, "(worker-3) missed")) << coordinator_log;
}

TEST(WorkerFailureTest, ShardedSurvivorsRecoverFromPeerMemory) {
  const std::string run_dir = TmpPath("recover_zero1");
  std::vector<std::string> args = Args(run_dir, 2);
  args.push_back("--sync=zero1");
  bool killed = false;
  TandemRun r = RunTandem(args, [&](const std::string& line) {
    if (!killed && absl::StartsWith(line, "step 20/")) {
      const int pid = ReadPid(run_dir, "worker-3");
      ASSERT_GT(pid, 0);
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed = true;
    }
  });
  ASSERT_TRUE(killed) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  // Each lost shard came from its ring neighbour's copy, not the disk.
  const size_t at = r.stdout_text.find("recovered from peer memory at step ");
  ASSERT_NE(at, std::string::npos) << r.stdout_text;
  const std::string line = r.stdout_text.substr(at, r.stdout_text.find('\n', at) - at);
  EXPECT_TRUE(absl::StrContains(line, "with 3 worker(s)")) << line;
  EXPECT_TRUE(absl::StrContains(line, "shard(s) from a neighbour's copy")) << line;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "resumed from")) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "peer memory cannot serve")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "epoch 2 test accuracy")) << r.stdout_text;
}

TEST(WorkerFailureTest, SurvivorsStopCleanlyWhenTheyCannotRegroup) {
  const std::string run_dir = TmpPath("giveup");
  bool killed = false;
  TandemRun r = RunTandem(Args(run_dir, 4), [&](const std::string& line) {
    if (!killed && absl::StartsWith(line, "step 20/")) {
      const int pid = ReadPid(run_dir, "worker-3");
      ASSERT_GT(pid, 0);
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed = true;
    }
  });
  ASSERT_TRUE(killed) << r.stdout_text << r.stderr_text;
  EXPECT_EQ(r.exit_code, 1) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "tandem local: worker-")) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "exited with status 1")) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "re-joining failed")) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "generation 1, rank ")) << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "allreduce")) << r.stderr_text;
  // ... and the lost rank, from the coordinator's verdict.
  EXPECT_TRUE(absl::StrContains(r.stderr_text, "(worker-3) exited")) << r.stderr_text;
  // Every survivor exited on its own with that error (none was still
  // running to be stopped by tandem).
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::StrContains(r.stdout_text, absl::StrCat("worker-", i,
                                                              " exited with status 1")))
        << r.stdout_text;
  }
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "worker-3 killed by signal 9")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
