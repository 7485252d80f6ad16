// The example CNN (torchscript:, BatchNorm) through the batch and world
// changes of an elastic job:
//
//  - `--batch auto:64,256` from a start of 2 x 16 = 32 on Fashion-MNIST
//    (real labels, so the gradient-noise reports the controller needs come
//    early): the controller must leave 32 (below its minimum) once it has
//    its reports, so the job switches mid-epoch, in place, to a batch in
//    [64, 256] and trains on with the module;
//  - `tandem add-worker` mid-job on a 2,400-sample dataset converted from
//    .npy (random 28x28 images: this is about the data path, not accuracy):
//    the third worker loads the module, the job re-joins at world 3 from
//    the last checkpoint and finishes.
//
// In both, the workers' sample logs (rolled-back steps not counted) hold
// every sample of each epoch exactly once.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/worker/sample_log.h"
#include "tests/e2e/tandem_harness.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSamples = 2400;  // a multiple of 32 and 48: no dropped tail at worlds 2 and 3
constexpr int kFashionMnist = 60000;
constexpr char kCnn[] = "--model=torchscript:common/torchscript/cnn.pt";

// Converts the random dataset once per test binary; returns its directory.
const std::string& Dataset() {
  static const std::string* dir = [] {
    auto* d = new std::string(TmpPath("npy"));
    const std::string py = absl::StrCat(
        "/usr/bin/python3 -c \"import numpy as np; r = np.random.default_rng(7); "
        "np.save('", *d, "-x.npy', r.random((", kSamples, ", 28, 28), dtype=np.float32)); "
        "np.save('", *d, "-y.npy', r.integers(0, 10, ", kSamples, "))\"");
    EXPECT_EQ(std::system(py.c_str()), 0) << py;
    TandemRun c = RunTandem({"convert", "--mode=npy", "--features=" + *d + "-x.npy",
                             "--labels=" + *d + "-y.npy", "--out_dir=" + *d});
    EXPECT_EQ(c.exit_code, 0) << c.stdout_text << c.stderr_text;
    return d;
  }();
  return *dir;
}

// What `workers`' sample logs under `dir` say the final model trained on:
// `epochs` epochs, each of at least `samples` - `max_dropped` distinct
// samples (an epoch's short last batch may be dropped) and none repeated.
void ExpectEachSampleOnce(const std::string& dir, int workers, int epochs, int samples,
                          int max_dropped) {
  std::vector<worker::SampleRecord> records;
  for (int w = 0; w < workers; ++w) {
    absl::Status s = worker::ReadSampleLog(absl::StrCat(dir, "/worker-", w, ".samples"), &records);
    ASSERT_TRUE(s.ok()) << s;
  }
  const auto counts = worker::EffectiveSampleCounts(records);
  ASSERT_EQ(counts.size(), static_cast<size_t>(epochs));
  for (const auto& [epoch, ids] : counts) {
    int repeated = 0;
    for (const auto& [id, n] : ids) repeated += n - 1;
    EXPECT_GE(ids.size(), static_cast<size_t>(samples - max_dropped)) << "epoch " << epoch;
    EXPECT_LE(ids.size(), static_cast<size_t>(samples)) << "epoch " << epoch;
    EXPECT_EQ(repeated, 0) << "epoch " << epoch;
  }
}

TEST(TorchScriptElastic, BatchAutoSwitchesMidEpochAndLosesNoSample) {
  const std::string samples = TmpPath("auto-samples");
  ASSERT_EQ(mkdir(samples.c_str(), 0755), 0);
  int64_t new_batch = 0;  // from "batch 32 -> N at step S ..."
  bool trained_at_new = false;
  TandemRun r = RunTandem(
      {"local", "--workers=2", kCnn, "--dataset=fashion-mnist", "--epochs=1", "--batch-size=16",
       "--batch=auto:64,256", "--log-every=20", "--checkpoint-every=0",
       "--worker-arg=--sample_log_dir=" + samples, "--run-dir=" + TmpPath("auto")},
      [&](const std::string& line) {
        if (new_batch == 0 && absl::StartsWith(line, "batch 32 -> ")) {
          const std::string rest = line.substr(strlen("batch 32 -> "));
          EXPECT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &new_batch)) << line;
        }
        trained_at_new = trained_at_new ||
                         (new_batch > 0 && absl::StartsWith(line, "step ") &&
                          absl::StrContains(line, absl::StrCat(" batch ", new_batch, " ")));
      });
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_GE(new_batch, 64) << "no switch out of 32 (below --batch auto's minimum):\n"
                           << r.stdout_text;
  EXPECT_LE(new_batch, 256) << r.stdout_text;
  EXPECT_TRUE(trained_at_new) << "no step trained at the new batch:\n" << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "re-joining")) << r.stdout_text;
  // Entered mid-epoch, the new batch keeps the epoch's short tail; at most
  // a last batch short of 256 could be dropped.
  ExpectEachSampleOnce(samples, 2, 1, kFashionMnist, 255);
}

TEST(TorchScriptElastic, AnAddedWorkerLoadsTheModuleAndEverySampleIsSeenOnce) {
  const std::string run_dir = TmpPath("scale-up");
  const std::string samples = TmpPath("scale-up-samples");
  ASSERT_EQ(mkdir(samples.c_str(), 0755), 0);
  std::unique_ptr<cli::Subprocess> adder;
  bool world3 = false;
  TandemRun r = RunTandem(
      {"local", "--workers=2", "--max-workers=3", kCnn, "--dataset=" + Dataset(), "--epochs=3",
       "--batch-size=16", "--log-every=5", "--checkpoint-every=7",
       // At least 30 ms a batch: the job (~190 steps) outlasts the new
       // worker's start.
       "--simulate_slow_data_ms=30", "--worker-arg=--sample_log_dir=" + samples,
       "--run-dir=" + run_dir},
      [&](const std::string& line) {
        world3 = world3 || (absl::StartsWith(line, "step ") && absl::StrContains(line, " world 3 "));
        if (adder == nullptr && absl::StartsWith(line, "step 20/")) {
          auto p = StartAddWorker(run_dir, TmpPath("add-worker.log"));
          ASSERT_TRUE(p.ok()) << p.status();
          adder = std::move(*p);
        }
      });
  ASSERT_NE(adder, nullptr) << r.stdout_text << r.stderr_text;
  ASSERT_TRUE(adder->WaitFor(absl::Seconds(120)));
  EXPECT_TRUE(adder->succeeded()) << adder->DescribeExit() << "\n"
                                  << ReadFile(TmpPath("add-worker.log"));
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  EXPECT_TRUE(world3) << "the third worker never trained:\n" << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, "with 3 worker(s)")) << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(
      r.stdout_text, "3 of 3 workers exited cleanly (1 added with tandem add-worker)"))
      << r.stdout_text;
  ExpectEachSampleOnce(samples, 3, 3, kSamples, 0);
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
