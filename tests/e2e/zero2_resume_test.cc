// `tandem local --sync zero2` with background checkpoints (the default,
// one shard file per rank written off the step) every 20 steps: Ctrl-C
// once the coordinator has recorded one, then the same command again
// resumes from that step (not 0), finishes, every sample of the epoch is
// trained on once over both runs (the workers' sample logs), and the steps
// both runs trained after the checkpoint log the same losses (the state
// restored exactly).
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/e2e/small_job.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSteps = 200;  // 20,000 samples of one epoch

std::vector<std::string> Args(const std::string& run_dir, const std::string& samples) {
  std::vector<std::string> args = InterruptibleJobArgs(run_dir, samples, kSteps);
  args.push_back("--sync=zero2");
  return args;
}

TEST(Zero2ResumeTest, InterruptedAfterABackgroundCheckpointResumesExactly) {
  // Ctrl-C once a checkpoint is committed (the coordinator's record), then
  // the same command: resumes there, finishes, every sample once.
  const ResumedRun r = InterruptAndResume("zero2", kSteps, Args);
  const int64_t committed = r.committed;
  ASSERT_GT(committed, 0);
  ASSERT_EQ(r.second.exit_code, 0);
  EXPECT_EQ(committed % 20, 0) << committed;
  // zero2's checkpoint: one shard file per rank under a manifest.
  EXPECT_TRUE(absl::StrContains(r.second.stdout_text,
                                absl::StrFormat("step-%08d.manifest", committed)))
      << r.second.stdout_text;

  // The first run, up to its interrupt, is the uninterrupted run of the
  // steps both trained after the checkpoint (the interrupt comes at the
  // first progress line after the commit). zero2's reduce-scatter and
  // sharded update are deterministic: a resume that restored the exact
  // state (parameters, optimizer shards, data cursor) logs the same losses.
  const std::map<int, std::string> before = LoggedLosses(r.first.stdout_text);
  const std::map<int, std::string> after = LoggedLosses(r.second.stdout_text);
  int compared = 0;
  for (const auto& [step, loss] : before) {
    if (step <= committed) continue;
    auto it = after.find(step);
    ASSERT_NE(it, after.end()) << "step " << step << " not logged by the resumed run";
    EXPECT_EQ(it->second, loss) << "step " << step;
    ++compared;
  }
  EXPECT_GT(compared, 0) << r.first.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
