// The data server killed (SIGKILL) mid-epoch under `tandem local`: it is
// restarted on its port, every worker's stream reconnects and resumes at
// its cursor, and across the 3 workers each of Fashion-MNIST's 60,000
// training samples is trained on exactly once (3 x 50 per global batch
// divides 60,000: no remainder to pad or drop). The sample ids come from
// the workers' --sample_log_dir files.
#include <signal.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

TEST(DataServerRestartTest, StreamsResumeAtTheirCursorsWithNoSampleLostOrRepeated) {
  const std::string run_dir = TmpPath("data-restart");
  const std::string samples = TmpPath("data-restart-samples");
  ASSERT_EQ(mkdir(samples.c_str(), 0755), 0);
  int killed = -1;
  bool back = false;
  TandemRun r = RunTandem(
      {"local", "--workers=3", "--model=mlp:784,128,10", "--epochs=1", "--batch-size=50",
       "--log-every=50", "--checkpoint-every=0", "--worker-arg=--sample_log_dir=" + samples,
       "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (killed < 0 && absl::StartsWith(line, "step 100/")) {
          killed = ReadPid(run_dir, "dataserver");
          ASSERT_GT(killed, 0);
          ASSERT_EQ(kill(killed, SIGKILL), 0);
        }
        if (absl::StrContains(line, "dataserver is back")) back = true;
      });
  ASSERT_GT(killed, 0) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "dataserver (pid " + std::to_string(killed) +
                                                   ") killed by signal 9"))
      << r.stdout_text;
  EXPECT_TRUE(back) << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "re-joining")) << r.stdout_text;

  std::vector<worker::SampleRecord> records;
  for (int w = 0; w < 3; ++w) {
    absl::Status s =
        worker::ReadSampleLog(absl::StrCat(samples, "/worker-", w, ".samples"), &records);
    ASSERT_TRUE(s.ok()) << s;
  }
  // One generation throughout, so every record counts.
  for (const worker::SampleRecord& rec : records) ASSERT_EQ(rec.generation, 1);
  const std::map<int64_t, std::map<int64_t, int>> counts = worker::EffectiveSampleCounts(records);
  ASSERT_EQ(counts.size(), 1u);
  const std::map<int64_t, int>& epoch = counts.begin()->second;
  int lost = 0, repeated = 0;
  for (int64_t id = 0; id < 60000; ++id) {
    auto it = epoch.find(id);
    if (it == epoch.end()) {
      ++lost;
    } else if (it->second > 1) {
      repeated += it->second - 1;
    }
  }
  EXPECT_EQ(epoch.size(), 60000u);
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(repeated, 0);
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
