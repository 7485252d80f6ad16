// `tandem local --autotune`: every configuration that can change the step
// for this model runs a short trial with its own processes and run
// directory (bucket sizes that give mlp:784,64,10's 0.2 MiB gradient the
// same single bucket are skipped, and say so), the table lists each with a
// step time, exactly one is chosen, and the job then trains with that one.
// A job too short to pay for the trials skips autotune and says why.
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(AutotuneTest, TimesEveryConfigurationAndTrainsWithTheFastest) {
  const std::string run_dir = TmpPath("autotune");
  TandemRun r = RunTandem({"local", "--autotune", "--autotune_steps=6", "--workers=2",
                           "--model=mlp:784,64,10", "--epochs=1", "--max_steps=300",
                           "--run_dir=" + run_dir});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  // Rows: "autotune: NAME [(default)]  MS  SAMPLES  VS [<- chosen]".
  int rows = 0, chosen = 0, skipped = 0;
  std::string choice, chosen_name;
  double chosen_ms = -1, fastest_ms = -1;
  for (absl::string_view line : absl::StrSplit(r.stdout_text, '\n')) {
    if (!absl::StartsWith(line, "autotune: ")) continue;
    if (absl::StrContains(line, " ms/step") || absl::StrContains(line, "configurations")) continue;
    if (absl::StartsWith(line, "autotune: skipped allreduce bucket_cap_mb=")) {
      EXPECT_TRUE(absl::StrContains(line, "(1 bucket(s)")) << line;
      ++skipped;
      continue;
    }
    if (absl::StartsWith(line, "autotune: training with --sync ")) {
      choice = std::string(line.substr(strlen("autotune: training with --sync ")));
      continue;
    }
    ++rows;
    EXPECT_FALSE(absl::StrContains(line, "failed")) << line;
    const bool is_chosen = absl::EndsWith(line, "  <- chosen");
    if (is_chosen) line.remove_suffix(strlen("  <- chosen"));
    std::vector<std::string> words = absl::StrSplit(line.substr(strlen("autotune: ")), ' ',
                                                    absl::SkipEmpty());
    ASSERT_GE(words.size(), 4u) << line;
    double ms = 0;
    ASSERT_TRUE(absl::SimpleAtod(words[words.size() - 3], &ms)) << line;
    if (fastest_ms < 0 || ms < fastest_ms) fastest_ms = ms;
    if (!is_chosen) continue;
    ++chosen;
    chosen_ms = ms;
    words.resize(words.size() - 3);
    if (words.back() == "(default)") words.pop_back();
    chosen_name = absl::StrJoin(words, " ");
  }
  EXPECT_EQ(skipped, 3) << r.stdout_text;  // 1, 4 and 100 MiB: one bucket, as 25
  EXPECT_EQ(rows, 3) << r.stdout_text;     // allreduce, zero1, zero2
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "3 configurations x 6 steps = 18 steps, 6% of the "
                                               "job's 300"))
      << r.stdout_text;
  EXPECT_EQ(chosen, 1) << r.stdout_text;
  // The chosen row is the fastest (ms/step printed to 0.01; rounding keeps the order).
  EXPECT_EQ(chosen_ms, fastest_ms) << r.stdout_text;
  ASSERT_FALSE(choice.empty()) << r.stdout_text;
  // The run trains with the chosen row's configuration.
  EXPECT_EQ(absl::StrReplaceAll(choice, {{" --sync_opt", ""}}), chosen_name) << r.stdout_text;
  // "allreduce --sync_opt bucket_cap_mb=4" -> the job header "sync allreduce bucket_cap_mb=4".
  const std::string header = "sync " + absl::StrReplaceAll(choice, {{" --sync_opt", ""}});
  EXPECT_TRUE(absl::StrContains(r.stdout_text, header)) << header << "\n" << r.stdout_text;
  for (int i = 0; i < 3; ++i) {
    const std::string prom = ReadFile(run_dir + "/autotune-" + std::to_string(i) + "/metrics/worker-0.prom");
    EXPECT_TRUE(std::regex_search(prom, std::regex("\ntandem_step_seconds_count(\\{[^}]*\\})? 6\n")))
        << "trial " << i << " did not stop after 6 steps:\n" << prom;
    // Trials are timed only: no evaluation pass at their end.
    const std::string log = ReadFile(run_dir + "/autotune-" + std::to_string(i) + "/worker-0.log");
    EXPECT_FALSE(log.empty()) << "trial " << i;
    EXPECT_FALSE(absl::StrContains(log, "test accuracy")) << "trial " << i << ":\n" << log;
  }
}

TEST(AutotuneTest, AJobTooShortForTheTrialsSkipsAutotune) {
  TandemRun r = RunTandem({"local", "--autotune", "--workers=2", "--model=mlp:784,64,10",
                           "--epochs=1", "--max_steps=12", "--run_dir=" + TmpPath("short")});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text,
                                "autotune: skipped: the job's 12 steps leave fewer than 5 steps"))
      << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "<- chosen")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "step 12/12")) << r.stdout_text;
  // --max_steps ended the run inside the epoch: it still reports the accuracy.
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "final (step 12) test accuracy")) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
