// Background checkpoints through the worker (--background_checkpoint, issue
// 34 item 4), trainers on threads with a real coordinator and data server:
// - allreduce (one file, rank 0's writer), zero2 and zero3 (one shard per
//   rank, each rank's writer; the coordinator records the step once every
//   shard is in): every file of a checkpoint written while later steps ran
//   (the last writer's step-4 file held mid-write until rank 0 has trained
//   step 6) is byte for byte that of a synchronous run, manifest included,
//   and so are the final parameters; for zero2 a resume from the
//   background step-8 checkpoint ends bit-identical to a resume from the
//   synchronous one.
// - a write failing mid-file (a full disk): allreduce's rank 0, or one zero2
//   rank of two: that step is never recorded, no torn file is left, the
//   previous checkpoint stays committed and the job resumes from it.
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/io/file.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "services/worker/checkpoint_fixture.h"

namespace tandem {
namespace worker {
namespace {

struct Case {
  const char* strategy;
  bool resume;  // also compare resumes from the two step-8 checkpoints
};

bool Sharded(const std::string& strategy) { return strategy != "allreduce"; }

// What a 2-rank job commits at `step` in `dir`: the file, or the manifest.
std::string Committed(const std::string& strategy, const std::string& dir, int64_t step) {
  return Sharded(strategy) ? checkpoint::ManifestPath(dir, step)
                           : absl::StrFormat("%s/step-%08d.tckpt", dir, step);
}

// Every file of that checkpoint, relative to its directory.
std::vector<std::string> Files(const std::string& strategy, int64_t step) {
  std::vector<std::string> files = {Committed(strategy, "", step).substr(1)};
  if (Sharded(strategy)) {
    files.push_back(checkpoint::ShardFileName(step, 0, 2));
    files.push_back(checkpoint::ShardFileName(step, 1, 2));
  }
  return files;
}

class BackgroundCheckpointTest : public CheckpointFixture,
                                 public ::testing::WithParamInterface<Case> {
 protected:
  // Resumes the job in `state` to step 12 (step 10's checkpoint removed,
  // so from step 8); the final parameters.
  std::vector<float> ResumeFromStep8(const std::string& state, const std::string& ckpt) {
    const std::string s = GetParam().strategy;
    EXPECT_EQ(std::remove(Committed(s, ckpt, 10).c_str()), 0);
    StartCoordinator(2, state);
    std::vector<TrainerRun> runs = RunTrainers(BigOptions(2, s, 12, ckpt, 4, false));
    for (const TrainerRun& r : runs) EXPECT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_TRUE(Said(absl::StrCat("resumed from ", Committed(s, ckpt, 8), " at step 8 ")));
    return runs[0].params;
  }
};

TEST_P(BackgroundCheckpointTest, ByteIdenticalToSynchronousAndResumesTheSame) {
  const std::string name = GetParam().strategy;
  const std::string sync_dir = TmpDir(name + "_sync"), bg_dir = TmpDir(name + "_bg");
  const std::string sync_state = TmpDir(name + "_sync_state");
  const std::string bg_state = TmpDir(name + "_bg_state");
  ASSERT_TRUE(MakeDirectories(sync_state).ok());
  ASSERT_TRUE(MakeDirectories(bg_state).ok());
  StartCoordinator(2, sync_state);
  std::vector<TrainerRun> sync_run = RunTrainers(BigOptions(2, name, 10, sync_dir, 4, false));
  for (const TrainerRun& r : sync_run) ASSERT_TRUE(r.result.ok()) << r.result.status();

  StartCoordinator(2, bg_state);
  absl::Notification step6, held;
  std::atomic<int> writes{0};
  std::vector<TrainerOptions> b = BigOptions(2, name, 10, bg_dir, 4, true);
  const auto print = b[0].progress;
  b[0].progress = [print, &step6](const std::string& line) {
    if (absl::StartsWith(line, "step 6/") && !step6.HasBeenNotified()) step6.Notify();
    print(line);
  };
  // The last writer's first file (step 4): held mid-write while steps 5
  // and 6 run (under zero2/3 rank 1's shard, so rank 0's comes first).
  b[Sharded(name) ? 1 : 0].checkpoint_write_options.before_write = [&](uint64_t offset,
                                                                        uint64_t) {
    if (offset > 0 && writes.fetch_add(1) == 0) {
      held.Notify();
      step6.WaitForNotification();
    }
    return absl::OkStatus();
  };
  std::vector<TrainerRun> bg_run = RunTrainers(b);
  for (const TrainerRun& r : bg_run) ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_TRUE(held.HasBeenNotified()) << "the step-4 write never reached the hook mid-file";

  for (int64_t step : {4, 8}) {
    for (const std::string& file : Files(name, step)) {
      absl::StatusOr<std::string> x = ReadFileToString(sync_dir + "/" + file);
      absl::StatusOr<std::string> y = ReadFileToString(bg_dir + "/" + file);
      ASSERT_TRUE(x.ok()) << x.status();
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_TRUE(*x == *y) << file << " differs between synchronous and background writes";
    }
  }
  EXPECT_EQ(bg_run[0].params, sync_run[0].params);
  // Both background checkpoints were recorded, in order, before the final one.
  const v1::CoordinatorState s = SavedCoordinatorState(bg_state);
  EXPECT_EQ(s.last_checkpoint().step(), 10);
  ASSERT_GE(s.earlier_checkpoints_size(), 2);
  EXPECT_EQ(s.earlier_checkpoints(0).path(), Committed(name, bg_dir, 8));
  EXPECT_EQ(s.earlier_checkpoints(1).step(), 4);

  if (!GetParam().resume) return;
  const std::vector<float> from_sync = ResumeFromStep8(sync_state, sync_dir);
  const std::vector<float> from_bg = ResumeFromStep8(bg_state, bg_dir);
  ASSERT_FALSE(from_bg.empty());
  EXPECT_NE(from_bg, bg_run[0].params) << "training continued";
  EXPECT_EQ(from_bg, from_sync) << "a resume from the background checkpoint differs";
}

INSTANTIATE_TEST_SUITE_P(Strategies, BackgroundCheckpointTest,
                         ::testing::Values(Case{"allreduce", false}, Case{"zero2", true},
                                           Case{"zero3", false}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.strategy);
                         });

class BackgroundFailureTest : public CheckpointFixture,
                              public ::testing::WithParamInterface<const char*> {};

// The writer of the last file fails its step-8 file mid-file (allreduce:
// rank 0's one file; zero2: rank 1's shard, after rank 0 wrote its shard
// and the manifest): step 8 is never recorded, no torn file is left,
// training finishes, and without the final checkpoint the job resumes
// from step 4.
TEST_P(BackgroundFailureTest, AFailedWriteLeavesThePreviousCheckpoint) {
  const std::string name = GetParam();
  const std::string state = TmpDir(name + "_fail_state"), ckpt = TmpDir(name + "_fail");
  ASSERT_TRUE(MakeDirectories(state).ok());
  StartCoordinator(2, state);
  std::atomic<int> files{0};
  std::vector<TrainerOptions> o = BigOptions(2, name, 9, ckpt, 4, true);
  o[Sharded(name) ? 1 : 0].checkpoint_write_options = FailFileMidWrite(1, &files);
  std::vector<TrainerRun> runs = RunTrainers(o);
  for (const TrainerRun& r : runs) ASSERT_TRUE(r.result.ok()) << r.result.status();
  const std::string torn = Sharded(name) ? ckpt + "/" + checkpoint::ShardFileName(8, 1, 2)
                                         : Committed(name, ckpt, 8);
  EXPECT_FALSE(ReadFileToString(torn).ok()) << "a torn file was left: " << torn;
  if (Sharded(name)) {
    EXPECT_TRUE(ReadFileToString(ckpt + "/" + checkpoint::ShardFileName(8, 0, 2)).ok())
        << "rank 0's shard should have been written (only rank 1 failed)";
  }
  const v1::CoordinatorState s = SavedCoordinatorState(state);
  EXPECT_EQ(s.last_checkpoint().step(), 9);  // the final, synchronous one
  ASSERT_GE(s.earlier_checkpoints_size(), 1);
  EXPECT_EQ(s.earlier_checkpoints(0).step(), 4) << "step 8 was recorded after all";

  ASSERT_EQ(std::remove(s.last_checkpoint().path().c_str()), 0);
  StartCoordinator(2, state);
  std::vector<TrainerRun> resumed = RunTrainers(BigOptions(2, name, 10, ckpt, 0, true));
  for (const TrainerRun& r : resumed) ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", Committed(name, ckpt, 4), " at step 4 ")));
}

INSTANTIATE_TEST_SUITE_P(Strategies, BackgroundFailureTest,
                         ::testing::Values("allreduce", "zero2"));

}  // namespace
}  // namespace worker
}  // namespace tandem
