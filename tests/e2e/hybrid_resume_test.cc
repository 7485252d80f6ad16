// `tandem local --sync hybrid` on two simulated nodes with one shard server
// (so ring_share=auto splits the vector, f = 0.5: half summed by a ring
// among the nodes and stepped on the workers, half stepped on the server;
// hybrid_split.h), checkpoints every 20 steps written by rank 0: Ctrl-C once
// the coordinator has recorded one, then the same command again resumes
// from that step, finishes, every sample of the epoch is trained on once
// over both runs, and every step both it and an uninterrupted run of the
// same command log, the last one included, logs the same loss (the ring
// part's optimizer state on the workers and the servers' part restored
// exactly). Skipped where no network namespace can be made (not root).
#include <map>
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

constexpr int kSteps = 100;  // 10,000 samples of one epoch: three short runs

// The small job's 2 workers as 2 nodes of one worker each, one shard server
// (a node of its own), 1 Gbit/s links.
std::vector<std::string> Args(const std::string& run_dir, const std::string& samples) {
  std::vector<std::string> args;
  for (const std::string& a : InterruptibleJobArgs(run_dir, samples, kSteps)) {
    if (a != "--workers=2") args.push_back(a);
  }
  for (const char* a : {"--nodes=2", "--workers_per_node=1", "--link=1gbit", "--sync=hybrid",
                        "--shard_servers=1", "--sync_opt=chunk_mb=0.02"}) {
    args.push_back(a);
  }
  return args;
}

bool NoNamespaces(const TandemRun& r) {
  return absl::StrContains(r.stdout_text + r.stderr_text, "cannot create a network namespace");
}

TEST(HybridResumeTest, RingShareInterruptedAfterACheckpointResumesExactly) {
  // The uninterrupted run first: it also tells whether simulated nodes work.
  const std::string whole_dir = TmpPath("hybrid-whole");
  const TandemRun whole = RunTandem(Args(whole_dir, MakeTmpDir("hybrid-whole-samples")));
  if (NoNamespaces(whole)) GTEST_SKIP() << "simulated nodes need root: " << whole.stderr_text;
  ASSERT_EQ(whole.exit_code, 0) << whole.stdout_text << whole.stderr_text;
  // The split is really on (not the f = 0 of one server per node).
  const std::string log = ReadFile(whole_dir + "/worker-0.log");
  ASSERT_TRUE(absl::StrContains(log, "ring_share=auto: f = 0.500 from 2 nodes and 1 shard servers"))
      << log;

  const ResumedRun r = InterruptAndResume("hybrid", kSteps, Args);
  ASSERT_GT(r.committed, 0);
  ASSERT_EQ(r.second.exit_code, 0);
  EXPECT_EQ(r.committed % 20, 0) << r.committed;

  const std::map<int, std::string> expected = LoggedLosses(whole.stdout_text);
  const std::map<int, std::string> resumed = LoggedLosses(r.second.stdout_text);
  ASSERT_TRUE(expected.count(kSteps)) << whole.stdout_text;
  ASSERT_TRUE(resumed.count(kSteps)) << r.second.stdout_text;
  int compared = 0;
  for (const auto& [step, loss] : resumed) {
    if (step <= r.committed) continue;
    auto it = expected.find(step);
    ASSERT_NE(it, expected.end()) << "step " << step << " not logged by the uninterrupted run";
    EXPECT_EQ(loss, it->second) << "step " << step;
    ++compared;
  }
  EXPECT_GT(compared, 0) << r.second.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
