// A corrupt committed checkpoint: with every worker stopped (SIGSTOP, so
// nothing is written meanwhile) the test reads the coordinator's durable
// state for the last committed checkpoint and flips one byte in the middle
// of that file, then kills worker-2 and lets the others go on. The two
// survivors re-join and rank 0 must not load the damaged file: it warns,
// naming it, and resumes from the commit before it; the job finishes.
#include <signal.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {
namespace {

bool FlipByteInTheMiddle(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) return false;
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 100) return false;
  const std::streamoff at = size * 3 / 5;
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(at);
  f.write(&c, 1);
  return static_cast<bool>(f);
}

TEST(CorruptCheckpointTest, RankZeroFallsBackToThePreviousCommitNamingTheFile) {
  const std::string run_dir = TmpPath("corrupt");
  bool done = false;
  v1::CoordinatorState state;
  TandemRun r = RunTandem(
      {"local", "--workers=3", "--min-workers=2", "--keep-going", "--model=mlp:784,128,10",
       "--epochs=1", "--max-steps=80", "--log-every=10", "--checkpoint-every=10",
       "--run-dir=" + run_dir},
      [&](const std::string& line) {
        if (done || !absl::StartsWith(line, "step 30/")) return;
        done = true;
        int pids[3];
        for (int i = 0; i < 3; ++i) {
          pids[i] = ReadPid(run_dir, absl::StrCat("worker-", i));
          ASSERT_GT(pids[i], 0);
          ASSERT_EQ(kill(pids[i], SIGSTOP), 0);
        }
        ASSERT_TRUE(state.ParseFromString(ReadFile(run_dir + "/coordinator-state/coordinator_state.pb")));
        ASSERT_GT(state.earlier_checkpoints_size(), 0) << state.DebugString();
        ASSERT_TRUE(FlipByteInTheMiddle(state.last_checkpoint().path())) << state.DebugString();
        ASSERT_EQ(kill(pids[2], SIGKILL), 0);
        ASSERT_EQ(kill(pids[0], SIGCONT), 0);
        ASSERT_EQ(kill(pids[1], SIGCONT), 0);
      });
  ASSERT_TRUE(done) << r.stdout_text << r.stderr_text;
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  const v1::CheckpointRecord& bad = state.last_checkpoint();
  const v1::CheckpointRecord& previous = state.earlier_checkpoints(0);
  EXPECT_TRUE(absl::StrContains(r.stdout_text, absl::StrCat("warning: checkpoint ", bad.path(),
                                                            " (step ", bad.step(),
                                                            ") is unreadable and was not loaded")))
      << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text,
                                absl::StrCat("falling back to the previous committed checkpoint ",
                                             previous.path(), " (step ", previous.step(), ")")))
      << r.stdout_text;
  EXPECT_TRUE(absl::StrContains(r.stdout_text, absl::StrCat("resumed from ", previous.path(),
                                                            " at step ", previous.step())))
      << r.stdout_text;
  EXPECT_FALSE(absl::StrContains(r.stdout_text, "resumed from " + bad.path())) << r.stdout_text;
}

}  // namespace
}  // namespace e2e
}  // namespace tandem
