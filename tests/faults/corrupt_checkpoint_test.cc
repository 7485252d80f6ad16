// A corrupt committed checkpoint: with every worker stopped (SIGSTOP, so
// nothing is written meanwhile; at a moment when no checkpoint is being
// written or awaits its commit) the test reads the coordinator's durable
// state for the last committed checkpoint and flips one byte in the middle
// of that file, then kills worker-2 and lets the others go on. The two
// survivors re-join and rank 0 must not load the damaged file: it warns,
// naming it, and resumes from the commit before it; the job finishes. The
// workers run with --recover_from_memory=false (under allreduce the
// survivors would otherwise continue from memory and read no checkpoint)
// and --background_checkpoint=false (a snapshot already handed to the
// background writer but not yet opened leaves no temporary file, so the
// test could not tell that a newer checkpoint is still to be committed).
#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

// The newest step-<N>.tckpt in `dir` (-1 if none) and whether a write is
// in flight (a temporary file).
int64_t NewestCheckpoint(const std::string& dir, bool* writing) {
  int64_t newest = -1;
  *writing = false;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.find(".tmp") != std::string::npos) *writing = true;
    int64_t step = 0;
    if (absl::StartsWith(name, "step-") && absl::EndsWith(name, ".tckpt") &&
        absl::SimpleAtoi(name.substr(5, name.size() - 5 - 6), &step)) {
      newest = std::max(newest, step);
    }
  }
  closedir(d);
  return newest;
}

TEST(CorruptCheckpointTest, RankZeroFallsBackToThePreviousCommitNamingTheFile) {
  const std::string run_dir = TmpPath("corrupt");
  bool done = false;
  v1::CoordinatorState state;
  TandemRun r = RunTandem(
      {"local", "--workers=3", "--min-workers=2", "--keep-going", "--settle-seconds=2", "--model=mlp:784,128,10",
       "--epochs=1", "--max-steps=150", "--log-every=5", "--checkpoint-every=10",
       "--worker-arg=--recover_from_memory=false", "--worker-arg=--background_checkpoint=false",
       "--run-dir=" + run_dir},
      [&](const std::string& line) {
        int64_t step = 0;
        if (done || !absl::StartsWith(line, "step ") ||
            !absl::SimpleAtoi(line.substr(5, line.find('/') - 5), &step) || step < 25) {
          return;
        }
        int pids[3];
        for (int i = 0; i < 3; ++i) {
          pids[i] = ReadPid(run_dir, absl::StrCat("worker-", i));
          ASSERT_GT(pids[i], 0);
          ASSERT_EQ(kill(pids[i], SIGSTOP), 0);
        }
        // Only with no checkpoint being written or waiting for its commit:
        // else let them go on and try at the next line.
        bool writing = false;
        const int64_t newest = NewestCheckpoint(run_dir + "/checkpoints", &writing);
        const bool parsed = state.ParseFromString(
            ReadFile(run_dir + "/coordinator-state/coordinator_state.pb"));
        if (writing || !parsed || state.last_checkpoint().step() != newest ||
            state.earlier_checkpoints_size() == 0) {
          for (int pid : pids) ASSERT_EQ(kill(pid, SIGCONT), 0);
          return;
        }
        done = true;
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
