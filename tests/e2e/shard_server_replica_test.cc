// A shard server killed (SIGKILL) mid-run under `tandem local --sync ps
// --shard-servers 2 --keep-going` (issue 34 item 3): each server's range
// is replicated on the other, so the next generation rebuilds the state of
// the last step the workers completed from the survivor's memory (its own
// range and the replica of the lost one) instead of the last checkpoint:
// at most one step is redone, and the final parameters and optimizer state
// are those of the same run without the fault (bit for bit: two workers'
// gradients sum the same in either order, and every step is replayed with
// the same samples).
#include <signal.h>

#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSteps = 60;

std::vector<std::string> Args(const std::string& run_dir) {
  return {"local", "--workers=2", "--shard-servers=2", "--sync=ps", "--keep-going",
          "--model=mlp:784,32,10", "--optimizer=adamw", "--max-steps=60", "--log-every=10",
          "--checkpoint-every=1000", "--sync-opt=chunk_mb=0.02,timeout_s=20,replicate=1",
          "--run-dir=" + run_dir};
}

checkpoint::Checkpoint Final(const std::string& run_dir) {
  checkpoint::ReadOptions ro;
  absl::StatusOr<checkpoint::Checkpoint> c = checkpoint::ReadShardedCheckpoint(
      checkpoint::ManifestPath(run_dir + "/checkpoints", kSteps), ro);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : checkpoint::Checkpoint{};
}

// "recovered from memory at step S (N steps redone)" -> N, or -1.
int StepsRedone(const std::string& out) {
  const size_t at = out.find("recovered from memory at step ");
  if (at == std::string::npos) return -1;
  const size_t open = out.find(" (", at);
  const size_t end = out.find(" steps redone)", open);
  int n = -1;
  if (open == std::string::npos || end == std::string::npos ||
      !absl::SimpleAtoi(out.substr(open + 2, end - open - 2), &n)) {
    return -1;
  }
  return n;
}

TEST(ShardServerReplicaTest, AKilledServerIsRebuiltFromItsReplicaLosingAtMostOneStep) {
  const std::string ref_dir = TmpPath("replica-ref");
  TandemRun ref = RunTandem(Args(ref_dir));
  ASSERT_EQ(ref.exit_code, 0) << ref.stdout_text << ref.stderr_text;

  const std::string run_dir = TmpPath("replica-kill");
  bool killed = false;
  TandemRun r = RunTandem(Args(run_dir), [&](const std::string& line) {
    if (!killed && absl::StartsWith(line, "step 30/")) {
      const int pid = ReadPid(run_dir, "shard-1");
      ASSERT_GT(pid, 0);
      ASSERT_EQ(kill(pid, SIGKILL), 0);
      killed = true;
    }
  });
  ASSERT_TRUE(killed) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "restarting it on")) << r.stdout_text;
  const int redone = StepsRedone(r.stdout_text);
  EXPECT_GE(redone, 0) << "not recovered from memory:\n" << r.stdout_text;
  EXPECT_LE(redone, 1) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "resumed from")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(ReadFile(run_dir + "/worker-0.log"),
                                "from shard-server memory"))
      << ReadFile(run_dir + "/worker-0.log");

  const checkpoint::Checkpoint want = Final(ref_dir);
  const checkpoint::Checkpoint got = Final(run_dir);
  ASSERT_EQ(got.params.size(), want.params.size());
  ASSERT_FALSE(want.params.empty());
  double worst = 0;
  for (size_t i = 0; i < want.params.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got.params[i]) - want.params[i]));
  }
  EXPECT_LE(worst, 1e-6);
  ASSERT_EQ(got.optimizer_state.size(), want.optimizer_state.size());
  for (size_t b = 0; b < want.optimizer_state.size(); ++b) {
    EXPECT_EQ(got.optimizer_state[b].second, want.optimizer_state[b].second)
        << want.optimizer_state[b].first;
  }
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
