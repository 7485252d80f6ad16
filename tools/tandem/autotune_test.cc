// Autotune's pieces: the configurations tried for a layout, the step time
// read from worker snapshots, the choice of the fastest and the table.
#include "tools/tandem/autotune.h"

#include "absl/strings/match.h"
#include "common/metrics/prom_text.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

bool Has(const std::vector<AutotuneCandidate>& c, const std::string& sync, const std::string& opt) {
  for (const AutotuneCandidate& x : c) {
    if (x.sync == sync && x.sync_opt == opt) return true;
  }
  return false;
}

TEST(AutotuneTest, CandidatesAreLosslessAndStartWithTheDefault) {
  LocalOptions o;
  std::vector<AutotuneCandidate> c = AutotuneCandidates(o);
  ASSERT_FALSE(c.empty());
  EXPECT_TRUE(c[0].is_default);
  EXPECT_EQ(c[0].sync, "allreduce");
  int defaults = 0;
  for (const AutotuneCandidate& x : c) {
    defaults += x.is_default;
    EXPECT_NE(x.sync, "compressed") << "a lossy codec changes the numbers";
  }
  EXPECT_EQ(defaults, 1);
  EXPECT_TRUE(Has(c, "allreduce", "bucket_cap_mb=1"));
  EXPECT_TRUE(Has(c, "zero2", "bucket_cap_mb=25"));
  EXPECT_FALSE(Has(c, "allreduce", "hier=1,bucket_cap_mb=25")) << "one node: no hierarchy";
  o.nodes = 2;
  o.workers_per_node = 2;
  EXPECT_TRUE(Has(AutotuneCandidates(o), "allreduce", "hier=1,bucket_cap_mb=25"));
}

// A 0.8 MiB gradient is one bucket under every cap: only the default is
// timed of the allreduce bucket sizes (the others were picked by noise).
TEST(AutotuneTest, BucketSizesThatChangeNothingAreSkipped) {
  LocalOptions o;
  std::vector<std::string> skipped;
  auto one_bucket = [](double) { return 1; };
  std::vector<AutotuneCandidate> c = AutotuneCandidates(o, one_bucket, &skipped);
  EXPECT_TRUE(Has(c, "allreduce", "bucket_cap_mb=25"));
  EXPECT_FALSE(Has(c, "allreduce", "bucket_cap_mb=1"));
  EXPECT_FALSE(Has(c, "allreduce", "bucket_cap_mb=100"));
  EXPECT_TRUE(Has(c, "zero1", ""));
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_TRUE(absl::StrContains(skipped[0], "allreduce bucket_cap_mb=1 (1 bucket(s)")) << skipped[0];
  // 12 MiB of gradients: 1 MiB -> 12 buckets, 4 -> 3, 25 and 100 -> 1.
  auto twelve = [](double cap) { return cap >= 12 ? 1 : static_cast<int>(12 / cap); };
  skipped.clear();
  c = AutotuneCandidates(o, twelve, &skipped);
  EXPECT_TRUE(Has(c, "allreduce", "bucket_cap_mb=1"));
  EXPECT_TRUE(Has(c, "allreduce", "bucket_cap_mb=4"));
  EXPECT_FALSE(Has(c, "allreduce", "bucket_cap_mb=100"));
  EXPECT_EQ(skipped.size(), 1u);
}

// The trials stay within a tenth of the job: fewer steps each for a short
// job, none when fewer than 5 would be left.
TEST(AutotuneTest, TrialBudgetIsAFractionOfTheJob) {
  EXPECT_EQ(AutotuneStepsPerTrial(30, 10000, 6), 30);
  EXPECT_EQ(AutotuneStepsPerTrial(30, 1200, 6), 20);  // 120 steps over 6 trials
  EXPECT_EQ(AutotuneStepsPerTrial(30, 200, 6), 0);    // 3 each: not worth it
  LocalOptions o;
  o.workers = 2;
  o.batch_size = 64;
  o.epochs = 2;
  EXPECT_EQ(JobSteps(o, 60000), 2 * (60000 / 128));
  o.max_steps = 300;
  EXPECT_EQ(JobSteps(o, 60000), 300);
}

ProcessMetrics Snapshot(const std::string& name, const std::string& text) {
  auto s = ParsePromText(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return {name, s.ok() ? *s : std::vector<PromSample>{}};
}

TEST(AutotuneTest, MeanStepSecondsOverWorkersOnly) {
  std::vector<ProcessMetrics> m = {
      Snapshot("worker-0", "tandem_step_seconds_sum 2\ntandem_step_seconds_count 10\n"),
      Snapshot("worker-1", "tandem_step_seconds_sum 4\ntandem_step_seconds_count 10\n"),
      Snapshot("dataserver", "tandem_step_seconds_sum 100\ntandem_step_seconds_count 1\n")};
  auto s = MeanStepSeconds(m);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(*s, 0.3);
  EXPECT_EQ(MeanStepSeconds({m[2]}).status().code(), absl::StatusCode::kNotFound);
}

TEST(AutotuneTest, FastestTrialSkipsFailuresAndPrefersTheEarlierOnATie) {
  std::vector<AutotuneTrial> t(4);
  t[0].step_seconds = 0.02;
  t[0].candidate.is_default = true;
  t[1].step_seconds = 0.001;
  t[1].error = "crashed";
  t[2].step_seconds = 0.015;
  t[3].step_seconds = 0.015;
  EXPECT_EQ(FastestTrial(t), 2);
  for (AutotuneTrial& x : t) x.error = "no";
  EXPECT_EQ(FastestTrial(t), -1);
}

TEST(AutotuneTest, TableShowsEveryTrialAndTheChoice) {
  AutotuneResult r;
  r.trials.resize(3);
  r.trials[0] = {{"allreduce", "bucket_cap_mb=25", true}, 0.020, 6400, ""};
  r.trials[1] = {{"allreduce", "bucket_cap_mb=4", false}, 0.010, 12800, ""};
  r.trials[2] = {{"zero2", "bucket_cap_mb=25", false}, 0, 0, "worker-1 exited 1"};
  r.chosen = 1;
  const std::string t = FormatAutotune(r);
  EXPECT_TRUE(absl::StrContains(t, "allreduce bucket_cap_mb=25 (default)")) << t;
  EXPECT_TRUE(absl::StrContains(t, "2.00x  <- chosen")) << t;
  EXPECT_TRUE(absl::StrContains(t, "failed: worker-1 exited 1")) << t;
  EXPECT_TRUE(absl::StrContains(t, "training with --sync allreduce --sync_opt bucket_cap_mb=4")) << t;
}

}  // namespace
}  // namespace cli
}  // namespace tandem
