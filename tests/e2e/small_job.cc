#include "tests/e2e/small_job.h"

#include <sys/stat.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {

std::vector<std::string> SmallJobArgs(const std::string& run_dir, const std::string& samples,
                                      int steps, int checkpoint_every) {
  return {"local",
          "--workers=2",
          "--model=mlp:784,64,10",
          "--epochs=1",
          "--batch_size=50",
          absl::StrCat("--max_steps=", steps),
          "--log_every=10",
          absl::StrCat("--checkpoint_every=", checkpoint_every),
          "--worker_arg=--sample_log_dir=" + samples,
          "--run_dir=" + run_dir};
}

std::vector<std::string> InterruptibleJobArgs(const std::string& run_dir,
                                              const std::string& samples, int steps) {
  std::vector<std::string> args = SmallJobArgs(run_dir, samples, steps, /*checkpoint_every=*/20);
  args.push_back("--simulate_slow_data_ms=10");
  return args;
}

std::map<int, std::string> LoggedLosses(const std::string& out) {
  std::map<int, std::string> losses;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (!absl::StartsWith(line, "step ")) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    int step = 0;
    if (f.size() < 6 || f[4] != "loss") continue;
    if (!absl::SimpleAtoi(f[1].substr(0, f[1].find('/')), &step)) continue;
    losses[step] = std::string(f[5]);
  }
  return losses;
}

std::string MakeTmpDir(const std::string& name) {
  const std::string dir = TmpPath(name);
  EXPECT_EQ(mkdir(dir.c_str(), 0755), 0) << dir;
  return dir;
}

SampleCoverage CountSamples(const std::vector<std::string>& dirs) {
  std::vector<worker::SampleRecord> records;
  for (const std::string& dir : dirs) {
    for (int w = 0; w < 2; ++w) {
      absl::Status s =
          worker::ReadSampleLog(absl::StrCat(dir, "/worker-", w, ".samples"), &records);
      EXPECT_TRUE(s.ok()) << s;
    }
  }
  const auto counts = worker::EffectiveSampleCounts(records);
  EXPECT_EQ(counts.size(), 1u) << "one epoch";
  SampleCoverage c;
  if (counts.empty()) return c;
  for (const auto& [id, n] : counts.begin()->second) {
    ++c.distinct;
    c.repeated += n - 1;
  }
  return c;
}

ResumedRun InterruptAndResume(
    const std::string& name, int steps,
    const std::function<std::vector<std::string>(const std::string& run_dir,
                                                 const std::string& samples)>& args) {
  ResumedRun r;
  r.run_dir = TmpPath(name);
  r.first_samples = MakeTmpDir(name + "-samples-1");
  r.second_samples = MakeTmpDir(name + "-samples-2");
  const std::string& run_dir = r.run_dir;
  bool interrupted = false;
  r.first = RunTandem(args(run_dir, r.first_samples), InterruptOnceCommitted(run_dir, &interrupted));
  const int64_t committed = CommittedStep(run_dir);
  if (!interrupted || r.first.exit_code != 130 || committed <= 0 || committed >= steps) {
    ADD_FAILURE() << "not interrupted (exit " << r.first.exit_code << ") after a checkpoint "
                  << "before step " << steps << " (committed: " << committed << "):\n"
                  << r.first.stdout_text << r.first.stderr_text;
    return r;
  }
  r.committed = committed;
  r.second = RunTandem(args(run_dir, r.second_samples));
  const std::string& out = r.second.stdout_text;
  EXPECT_EQ(r.second.exit_code, 0) << out << r.second.stderr_text;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("tandem local: resuming from step ", committed,
                                                  " of the interrupted run in ", run_dir)))
      << out;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat(" at step ", committed, " ")))
      << "rank 0 did not resume from the checkpoint:\n" << out;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("step ", steps, "/", steps))) << out;
  EXPECT_FALSE(absl::StrContains(out + r.second.stderr_text, "join refused"))
      << out << r.second.stderr_text;
  // What the final model trained on, over both runs: each sample once.
  const SampleCoverage c = CountSamples({r.first_samples, r.second_samples});
  EXPECT_EQ(c.distinct, steps * kSmallJobSamplesPerStep) << "samples lost";
  EXPECT_EQ(c.repeated, 0);
  return r;
}

}  // namespace e2e
}  // namespace tandem
