// Background checkpoints of the sharded strategies through the worker
// (--background_checkpoint, issue 34 item 4): every rank writes its shard
// on its own writer thread while training goes on and commits it as one of
// the step's shards; the coordinator records the step once all are in.
// - zero2 and zero3: every shard file and the manifest of a checkpoint
//   written while later steps ran (rank 1's step-4 shard held mid-file
//   until rank 0 has trained step 6) are byte for byte those of a
//   synchronous run, the final parameters too; for zero2 a resume from the
//   background step-8 checkpoint ends bit-identical to a resume from the
//   synchronous one.
// - a rank whose shard write fails mid-file: the step is not recorded, the
//   previous checkpoint stays committed and the job resumes from it.
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "common/io/file.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "services/worker/checkpoint_fixture.h"

namespace tandem {
namespace worker {
namespace {

// Over 1 MiB of parameters: a shard takes several write(2) calls, so the
// test hook can act mid-file.
constexpr char kBigMlp[] = "mlp:784,400,10";

v1::CoordinatorState SavedState(const std::string& state_dir) {
  v1::CoordinatorState s;
  absl::StatusOr<std::string> bytes = ReadFileToString(state_dir + "/coordinator_state.pb");
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (bytes.ok()) {
    EXPECT_TRUE(s.ParseFromString(*bytes));
  }
  return s;
}

// The files of a 2-rank sharded checkpoint at `step`: manifest, shards.
std::vector<std::string> CheckpointFiles(int64_t step) {
  return {checkpoint::ShardFileName(step, 0, 2), checkpoint::ShardFileName(step, 1, 2),
          checkpoint::ManifestPath("", step).substr(1)};
}

struct Case {
  const char* strategy;
  bool resume;  // also compare resumes from the two step-8 checkpoints
};

class ShardedBackgroundTest : public CheckpointFixture,
                              public ::testing::WithParamInterface<Case> {
 protected:
  // 2 workers of kBigMlp under the case's strategy, a checkpoint every 4.
  std::vector<TrainerOptions> Job(int steps, const std::string& ckpt, bool background) {
    std::vector<TrainerOptions> all = Options(2, GetParam().strategy, steps, ckpt);
    for (TrainerOptions& o : all) {
      o.model = kBigMlp;
      o.checkpoint_every = 4;
      o.background_checkpoint = background;
    }
    return all;
  }

  // Resumes the job in `state` to step 12 (the step-10 manifest removed,
  // so from step 8); the final parameters.
  std::vector<float> ResumeFromStep8(const std::string& state, const std::string& ckpt) {
    EXPECT_EQ(std::remove(checkpoint::ManifestPath(ckpt, 10).c_str()), 0);
    StartCoordinator(2, state);
    std::vector<TrainerRun> runs = RunTrainers(Job(12, ckpt, false));
    for (const TrainerRun& r : runs) EXPECT_TRUE(r.result.ok()) << r.result.status();
    EXPECT_TRUE(Said(absl::StrCat("resumed from ", checkpoint::ManifestPath(ckpt, 8),
                                  " at step 8 ")));
    return runs[0].params;
  }
};

TEST_P(ShardedBackgroundTest, ByteIdenticalToSynchronousAndResumesTheSame) {
  const std::string name = GetParam().strategy;
  const std::string sync_dir = TmpDir(name + "_sync"), bg_dir = TmpDir(name + "_bg");
  const std::string sync_state = TmpDir(name + "_sync_state"), bg_state = TmpDir(name + "_bg_state");
  ASSERT_TRUE(MakeDirectories(sync_state).ok());
  ASSERT_TRUE(MakeDirectories(bg_state).ok());
  StartCoordinator(2, sync_state);
  std::vector<TrainerRun> sync_run = RunTrainers(Job(10, sync_dir, false));
  for (const TrainerRun& r : sync_run) ASSERT_TRUE(r.result.ok()) << r.result.status();

  StartCoordinator(2, bg_state);
  absl::Notification step6, held;
  std::atomic<int> writes{0};
  std::vector<TrainerOptions> b = Job(10, bg_dir, true);
  const auto print = b[0].progress;
  b[0].progress = [print, &step6](const std::string& line) {
    if (absl::StartsWith(line, "step 6/") && !step6.HasBeenNotified()) step6.Notify();
    print(line);
  };
  // Rank 1's first shard (step 4): held mid-file while steps 5 and 6 run.
  b[1].checkpoint_write_options.before_write = [&](uint64_t offset, uint64_t) {
    if (offset > 0 && writes.fetch_add(1) == 0) {
      held.Notify();
      step6.WaitForNotification();
    }
    return absl::OkStatus();
  };
  std::vector<TrainerRun> bg_run = RunTrainers(b);
  for (const TrainerRun& r : bg_run) ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_TRUE(held.HasBeenNotified()) << "rank 1's step-4 write never reached the hook mid-file";

  for (int64_t step : {4, 8}) {
    for (const std::string& file : CheckpointFiles(step)) {
      absl::StatusOr<std::string> x = ReadFileToString(sync_dir + "/" + file);
      absl::StatusOr<std::string> y = ReadFileToString(bg_dir + "/" + file);
      ASSERT_TRUE(x.ok()) << x.status();
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_TRUE(*x == *y) << file << " differs between synchronous and background writes";
    }
  }
  EXPECT_EQ(bg_run[0].params, sync_run[0].params);
  // Both background checkpoints were recorded, in order, before the final one.
  const v1::CoordinatorState s = SavedState(bg_state);
  EXPECT_EQ(s.last_checkpoint().step(), 10);
  ASSERT_GE(s.earlier_checkpoints_size(), 2);
  EXPECT_EQ(s.earlier_checkpoints(0).step(), 8);
  EXPECT_EQ(s.earlier_checkpoints(0).path(), checkpoint::ManifestPath(bg_dir, 8));
  EXPECT_EQ(s.earlier_checkpoints(1).step(), 4);

  if (!GetParam().resume) return;
  const std::vector<float> from_sync = ResumeFromStep8(sync_state, sync_dir);
  const std::vector<float> from_bg = ResumeFromStep8(bg_state, bg_dir);
  ASSERT_FALSE(from_bg.empty());
  EXPECT_NE(from_bg, bg_run[0].params) << "training continued";
  EXPECT_EQ(from_bg, from_sync) << "a resume from the background checkpoint differs";
}

INSTANTIATE_TEST_SUITE_P(Zero, ShardedBackgroundTest,
                         ::testing::Values(Case{"zero2", true}, Case{"zero3", false}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.strategy);
                         });

class ShardedBackgroundFailureTest : public CheckpointFixture {};

// Rank 1's step-8 shard fails mid-file (a full disk): step 8 is never
// recorded although rank 0 wrote its shard and the manifest, no torn file
// is left, training finishes, and the job resumes from step 4.
TEST_F(ShardedBackgroundFailureTest, ARankFailingItsShardLeavesThePreviousCheckpoint) {
  const std::string state = TmpDir("fail_state"), ckpt = TmpDir("fail_ckpt");
  ASSERT_TRUE(MakeDirectories(state).ok());
  StartCoordinator(2, state);
  std::atomic<int> files{0};
  std::vector<TrainerOptions> o = Options(2, "zero2", 9, ckpt);
  for (TrainerOptions& x : o) {
    x.model = kBigMlp;
    x.checkpoint_every = 4;
    x.background_checkpoint = true;
  }
  o[1].checkpoint_write_options.before_write = [&](uint64_t offset, uint64_t) -> absl::Status {
    const int file = offset == 0 ? files.fetch_add(1) : files.load() - 1;
    if (file == 1 && offset > 0) return absl::ResourceExhaustedError("test hook: disk full");
    return absl::OkStatus();
  };
  std::vector<TrainerRun> runs = RunTrainers(o);
  for (const TrainerRun& r : runs) ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_FALSE(ReadFileToString(ckpt + "/" + checkpoint::ShardFileName(8, 1, 2)).ok())
      << "a torn shard was left";
  EXPECT_TRUE(ReadFileToString(ckpt + "/" + checkpoint::ShardFileName(8, 0, 2)).ok())
      << "rank 0's shard should have been written (only rank 1 failed)";
  const v1::CoordinatorState s = SavedState(state);
  EXPECT_EQ(s.last_checkpoint().step(), 9);  // the final, synchronous one
  ASSERT_GE(s.earlier_checkpoints_size(), 1);
  EXPECT_EQ(s.earlier_checkpoints(0).step(), 4) << "step 8 was recorded without rank 1's shard";

  // Without the final checkpoint, the job resumes from step 4.
  ASSERT_EQ(std::remove(checkpoint::ManifestPath(ckpt, 9).c_str()), 0);
  StartCoordinator(2, state);
  std::vector<TrainerOptions> again = Options(2, "zero2", 10, ckpt);
  for (TrainerOptions& x : again) x.model = kBigMlp;
  std::vector<TrainerRun> resumed = RunTrainers(again);
  for (const TrainerRun& r : resumed) ASSERT_TRUE(r.result.ok()) << r.result.status();
  EXPECT_TRUE(Said(absl::StrCat("resumed from ", checkpoint::ManifestPath(ckpt, 4), " at step 4 ")));
}

}  // namespace
}  // namespace worker
}  // namespace tandem
