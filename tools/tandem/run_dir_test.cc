#include "tools/tandem/run_dir.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"

namespace tandem {
namespace cli {
namespace {

std::string Dir(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(RunDirLock, ASecondRunIsRefusedNamingTheFirstsPid) {
  const std::string dir = Dir("locked");
  auto first = RunDirLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RunDirLock::Acquire(dir);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), absl::StrCat("(pid ", getpid(), ")")))
      << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "another --run_dir"));
  first->reset();  // released with the holder
  EXPECT_TRUE(RunDirLock::Acquire(dir).ok());
}

TEST(RunDirLock, AHolderThatDiesLeavesNoStaleLock) {
  const std::string dir = Dir("crashed");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto held = RunDirLock::Acquire(dir);
    char c = held.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();  // until killed: no destructor runs
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto refused = RunDirLock::Acquire(dir);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), absl::StrCat("(pid ", child, ")")))
      << refused.status();
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(RunDirLock::Acquire(dir).ok()) << "a crashed holder's lock must not stay";
  close(ready[0]);
  close(ready[1]);
}

void WriteState(const std::string& dir, const v1::CoordinatorState& state) {
  ASSERT_TRUE(MakeDirectories(dir + "/coordinator-state").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/coordinator-state/coordinator_state.pb",
                                  state.SerializeAsString())
                  .ok());
}

TEST(InspectRunDir, SaysWhatAnEarlierRunLeft) {
  const std::string dir = Dir("prior");
  auto none = InspectRunDir(dir, "local");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->kind, PriorRun::kNone);

  v1::CoordinatorState state;
  state.set_job_id("local");
  state.set_running(true);
  state.mutable_last_checkpoint()->set_step(300);
  state.mutable_last_checkpoint()->set_path(dir + "/checkpoints/step-300");
  state.mutable_last_checkpoint()->mutable_cursor()->set_samples_in_epoch(19200);
  WriteState(dir, state);
  auto interrupted = InspectRunDir(dir, "local");
  ASSERT_TRUE(interrupted.ok()) << interrupted.status();
  EXPECT_EQ(interrupted->kind, PriorRun::kInterrupted);
  const std::string resume = ResumeMessage(*interrupted);
  EXPECT_TRUE(absl::StartsWith(resume, "tandem local: resuming from step 300 of ")) << resume;
  EXPECT_TRUE(absl::StrContains(resume, "sample 19200")) << resume;

  state.set_finished(true);
  WriteState(dir, state);
  ASSERT_TRUE(WriteFileAtomically(ResultPath(dir), "epoch 2 test accuracy 0.8512 (10000 samples)\n")
                  .ok());
  auto finished = InspectRunDir(dir, "local");
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->kind, PriorRun::kFinished);
  const std::string done = FinishedMessage(*finished);
  EXPECT_TRUE(absl::StrContains(done, "has already finished")) << done;
  EXPECT_TRUE(absl::StrContains(done, "test accuracy 0.8512")) << done;
  EXPECT_TRUE(absl::StrContains(done, "pass another --run_dir")) << done;

  auto other = InspectRunDir(dir, "mine");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(other.status().message(), "--job_id local")) << other.status();

  ASSERT_TRUE(WriteFileAtomically(dir + "/coordinator-state/coordinator_state.pb", "\xff\xff").ok());
  EXPECT_EQ(InspectRunDir(dir, "local").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cli
}  // namespace tandem
