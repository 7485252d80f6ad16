// A bit-identical resume through the real workers with BatchNorm buffers
// (issue 29, item 4): `tandem local --model torchscript:cnn.pt` is stopped
// with Ctrl-C (SIGINT to tandem local) once a checkpoint is committed, the
// same command resumes it, and its final checkpoint equals an uninterrupted
// run's byte for byte: parameters, optimizer state (momentum) and the
// BatchNorm running statistics and counters (the model_buffers blob). A
// resume that lost the buffers (BatchNorm's running mean restarting from 0)
// or re-broadcast stale ones, or one that replayed or skipped a batch,
// would leave different bytes.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

constexpr int kSteps = 40;
constexpr int kCheckpointEvery = 4;

std::vector<std::string> Args(const std::string& run_dir) {
  return {"local", "--workers=2", "--model=torchscript:common/torchscript/cnn.pt",
          "--dataset=fashion-mnist", "--batch-size=16", "--lr=0.05",
          absl::StrCat("--max-steps=", kSteps),
          absl::StrCat("--checkpoint-every=", kCheckpointEvery), "--log-every=2",
          // At least 50 ms a batch: the interrupt (at step 6 or so) lands well
          // before the end.
          "--simulate_slow_data_ms=50", "--run-dir=" + run_dir};
}

checkpoint::Checkpoint FinalCheckpoint(const std::string& run_dir) {
  auto c = checkpoint::ReadWholeCheckpoint(
      absl::StrCat(run_dir, "/checkpoints/step-000000", kSteps, ".tckpt"), {});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : checkpoint::Checkpoint{};
}

bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(TorchScriptResume, InterruptedAndResumedEqualsUninterruptedByteForByte) {
  const std::string whole_dir = TmpPath("whole");
  TandemRun whole = RunTandem(Args(whole_dir));
  ASSERT_EQ(whole.exit_code, 0) << whole.stdout_text << whole.stderr_text;

  const std::string run_dir = TmpPath("interrupted");
  bool interrupted = false;
  TandemRun first = RunTandem(Args(run_dir), InterruptOnceCommitted(run_dir, &interrupted));
  ASSERT_TRUE(interrupted) << first.stdout_text << first.stderr_text;
  ASSERT_EQ(first.exit_code, 130) << first.stdout_text << first.stderr_text;
  const int64_t committed = CommittedStep(run_dir);
  ASSERT_GT(committed, 0);
  ASSERT_LT(committed, kSteps) << "the run finished before the interrupt took effect";

  TandemRun second = RunTandem(Args(run_dir));
  ASSERT_EQ(second.exit_code, 0) << second.stdout_text << second.stderr_text;
  EXPECT_TRUE(absl::StrContains(second.stdout_text,
                                absl::StrCat("tandem local: resuming from step ", committed)))
      << second.stdout_text;
  EXPECT_TRUE(absl::StrContains(second.stdout_text, absl::StrCat("step ", kSteps, "/", kSteps)))
      << second.stdout_text;

  const checkpoint::Checkpoint a = FinalCheckpoint(whole_dir);
  const checkpoint::Checkpoint b = FinalCheckpoint(run_dir);
  ASSERT_FALSE(a.params.empty());
  EXPECT_EQ(a.step, kSteps);
  EXPECT_EQ(b.step, kSteps);
  EXPECT_TRUE(SameBytes(a.params, b.params)) << "parameters differ after the resume";
  ASSERT_EQ(a.optimizer_state.size(), b.optimizer_state.size());
  for (size_t i = 0; i < a.optimizer_state.size(); ++i) {
    EXPECT_EQ(a.optimizer_state[i].first, b.optimizer_state[i].first);
    EXPECT_TRUE(SameBytes(a.optimizer_state[i].second, b.optimizer_state[i].second))
        << "optimizer state " << a.optimizer_state[i].first << " differs after the resume";
  }
  const std::string* buffers_a = a.FindBlob("model_buffers");
  const std::string* buffers_b = b.FindBlob("model_buffers");
  ASSERT_NE(buffers_a, nullptr);
  ASSERT_NE(buffers_b, nullptr);
  EXPECT_TRUE(*buffers_a == *buffers_b) << "BatchNorm buffers differ after the resume";
  // The buffers moved: BatchNorm's batch counters count every step's
  // forward (a test on untouched buffers would pass whatever the resume did).
  const auto initial = checkpoint::ReadWholeCheckpoint(
      absl::StrCat(whole_dir, "/checkpoints/step-0000000", kCheckpointEvery, ".tckpt"), {});
  ASSERT_TRUE(initial.ok()) << initial.status();
  ASSERT_NE(initial->FindBlob("model_buffers"), nullptr);
  EXPECT_NE(*initial->FindBlob("model_buffers"), *buffers_a);
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
