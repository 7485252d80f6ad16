#include "tests/e2e/small_job.h"

#include <sys/stat.h>

#include <map>

#include "absl/strings/str_cat.h"
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

}  // namespace e2e
}  // namespace tandem
