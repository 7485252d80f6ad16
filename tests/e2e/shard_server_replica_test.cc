// A shard server killed (SIGKILL) mid-run under `tandem local --sync ps|hybrid
// --shard-servers 2 --keep-going`, with the default settings (issue 34 item
// 3): each server's range is replicated on the other, at most one step
// behind, so the next generation rebuilds the state of the last step the
// workers completed, or of the step before it, from the survivor's memory
// (its own range and the replica of the lost one) instead of the last
// checkpoint: at most one step is redone, every sample is trained on once
// (the same ones as without the fault), and the final parameters and
// optimizer state are those of the same run without the fault (bit for
// bit: two workers' gradients sum the same in either order, and every step
// is replayed with the same samples). hybrid runs one node of two workers.
#include <signal.h>

#include <sys/stat.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSteps = 60;
constexpr int kWorkers = 2;
constexpr int kBatch = 50;  // 60 steps x 2 x 50: 6,000 samples of the first epoch

// Replication is the default: no --sync-opt replicate here.
std::vector<std::string> Args(const std::string& sync, const std::string& run_dir,
                              const std::string& samples) {
  return {"local", "--workers=2", "--shard-servers=2", "--sync=" + sync, "--keep-going",
          "--model=mlp:784,32,10", "--optimizer=adamw", "--max-steps=60", "--log-every=10",
          "--batch-size=50", "--checkpoint-every=1000", "--sync-opt=chunk_mb=0.02,timeout_s=20",
          "--worker-arg=--sample_log_dir=" + samples, "--run-dir=" + run_dir};
}

// The samples the final model was trained on (the steps a recovery rolled
// back count once, in the generation that redid them): each exactly once.
std::set<int64_t> SamplesOnce(const std::string& samples) {
  std::vector<worker::SampleRecord> records;
  for (int w = 0; w < kWorkers; ++w) {
    absl::Status s =
        worker::ReadSampleLog(absl::StrCat(samples, "/worker-", w, ".samples"), &records);
    EXPECT_TRUE(s.ok()) << s;
  }
  const std::map<int64_t, std::map<int64_t, int>> counts = worker::EffectiveSampleCounts(records);
  EXPECT_EQ(counts.size(), 1u);
  std::set<int64_t> ids;
  for (const auto& [epoch, per_id] : counts) {
    for (const auto& [id, n] : per_id) {
      EXPECT_EQ(n, 1) << "sample " << id << " of epoch " << epoch;
      ids.insert(id);
    }
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kSteps * kWorkers * kBatch));
  return ids;
}

std::string MakeDir(const std::string& name) {
  const std::string d = TmpPath(name);
  EXPECT_EQ(mkdir(d.c_str(), 0755), 0) << d;
  return d;
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

class ShardServerReplicaTest : public ::testing::TestWithParam<std::string> {};  // --sync

TEST_P(ShardServerReplicaTest, AKilledServerIsRebuiltFromItsReplicaLosingAtMostOneStep) {
  const std::string sync = GetParam();
  const std::string ref_dir = TmpPath("replica-ref-" + sync);
  const std::string ref_samples = MakeDir("replica-ref-samples-" + sync);
  TandemRun ref = RunTandem(Args(sync, ref_dir, ref_samples));
  ASSERT_EQ(ref.exit_code, 0) << ref.stdout_text << ref.stderr_text;
  EXPECT_TRUE(absl::StrContains(ReadFile(ref_dir + "/worker-0.log"), "shard-server replicas on"))
      << ReadFile(ref_dir + "/worker-0.log");

  const std::string run_dir = TmpPath("replica-kill-" + sync);
  const std::string samples = MakeDir("replica-kill-samples-" + sync);
  bool killed = false;
  TandemRun r = RunTandem(Args(sync, run_dir, samples), [&](const std::string& line) {
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
  EXPECT_EQ(SamplesOnce(samples), SamplesOnce(ref_samples));

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

INSTANTIATE_TEST_SUITE_P(Sync, ShardServerReplicaTest, ::testing::Values("ps", "hybrid"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace e2e
}  // namespace tandem
