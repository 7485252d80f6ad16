// ShardCommits alone, and through CoordinatorCore::CommitCheckpoint: a
// background sharded checkpoint is recorded only when every shard of its
// step has been reported in the running generation.
#include "services/coordinator/shard_commits.h"

#include <string>

#include "gtest/gtest.h"
#include "services/coordinator/coordinator_core.h"

namespace tandem {
namespace {

v1::CheckpointRecord Rec(int64_t step, int64_t millis = 0) {
  v1::CheckpointRecord r;
  r.set_step(step);
  r.set_path("/ckpt/step-" + std::to_string(step) + ".manifest");
  r.set_world_size(3);
  r.set_unix_millis(millis);
  return r;
}

TEST(ShardCommits, CompletesOnlyWhenEveryShardIsIn) {
  ShardCommits c;
  auto a = c.Add(1, Rec(20, 5), 2, 3);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->has_value());
  auto again = c.Add(1, Rec(20, 6), 2, 3);  // a retried report counts once
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  auto b = c.Add(1, Rec(20, 7), 0, 3);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_value());
  EXPECT_EQ(c.pending(), 1);
  auto done = c.Add(1, Rec(20, 9), 1, 3);
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE(done->has_value());
  EXPECT_EQ((*done)->step(), 20);
  EXPECT_EQ((*done)->path(), "/ckpt/step-20.manifest");
  EXPECT_EQ((*done)->unix_millis(), 9) << "stamped when it completed";
  EXPECT_EQ(c.pending(), 0);
}

TEST(ShardCommits, ANewerCompleteStepDropsAnOlderIncompleteOne) {
  ShardCommits c;
  ASSERT_FALSE(c.Add(1, Rec(20), 0, 2)->has_value());  // shard 1 of step 20 never comes
  ASSERT_FALSE(c.Add(1, Rec(40), 1, 2)->has_value());
  EXPECT_EQ(c.pending(), 2);
  auto done = c.Add(1, Rec(40), 0, 2);
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_EQ((*done)->step(), 40);
  EXPECT_EQ(c.pending(), 0);
}

TEST(ShardCommits, PruneDropsOtherGenerationsAndOlderSteps) {
  ShardCommits c;
  ASSERT_FALSE(c.Add(1, Rec(20), 0, 2)->has_value());
  ASSERT_FALSE(c.Add(1, Rec(60), 0, 2)->has_value());
  c.Prune(1, 40);
  EXPECT_EQ(c.pending(), 1);
  c.Prune(2, 0);
  EXPECT_EQ(c.pending(), 0);
  // Generation 2's shard 1 does not complete generation 1's shard 0.
  ASSERT_FALSE(c.Add(1, Rec(80), 0, 2)->has_value());
  auto other = c.Add(2, Rec(80), 1, 2);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition) << other.status();
}

TEST(ShardCommits, BadReportsAreRejectedWithTheReason) {
  ShardCommits c;
  auto out = c.Add(1, Rec(20), 3, 3);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status();
  EXPECT_EQ(c.Add(1, Rec(20), 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_FALSE(c.Add(1, Rec(20), 0, 3)->has_value());
  EXPECT_EQ(c.Add(1, Rec(20), 1, 4).status().code(), absl::StatusCode::kFailedPrecondition);
  v1::CheckpointRecord moved = Rec(20);
  moved.set_path("/elsewhere");
  EXPECT_EQ(c.Add(1, moved, 1, 3).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShardCommits, AtMostKMaxPendingStepsWait) {
  ShardCommits c;
  for (int i = 0; i < ShardCommits::kMaxPending + 3; ++i) {
    ASSERT_FALSE(c.Add(1, Rec(10 * (i + 1)), 0, 2)->has_value());
  }
  EXPECT_EQ(c.pending(), ShardCommits::kMaxPending);
  // The oldest were dropped: completing step 10 now needs its shard 0 again.
  ASSERT_FALSE(c.Add(1, Rec(10), 1, 2)->has_value());
}

// Through the core: the last checkpoint changes only with the last shard,
// and an ended generation's shards are refused.
TEST(CoordinatorShardCommit, RecordedOnlyWithTheLastShard) {
  CoordinatorOptions o;
  o.job_id = "job";
  o.min_workers = 1;
  o.max_workers = 1;
  o.settle_time = absl::ZeroDuration();
  auto core = CoordinatorCore::Create(o);
  ASSERT_TRUE(core.ok()) << core.status();
  v1::JoinRequest join;
  join.mutable_job()->set_job_id("job");
  join.set_worker_id("w0");
  ASSERT_TRUE((*core)->Join(join, absl::Seconds(5)).ok());

  v1::CommitCheckpointRequest whole;
  whole.mutable_job()->set_job_id("job");
  whole.set_generation(1);
  *whole.mutable_checkpoint() = Rec(10);
  ASSERT_TRUE((*core)->CommitCheckpoint(whole).ok());

  v1::CommitCheckpointRequest shard = whole;
  *shard.mutable_checkpoint() = Rec(20);
  shard.set_shards(2);
  shard.set_shard(1);
  ASSERT_TRUE((*core)->CommitCheckpoint(shard).ok());
  EXPECT_EQ((*core)->GetJobStatus().last_checkpoint().step(), 10) << "one shard of two";
  shard.set_shard(0);
  ASSERT_TRUE((*core)->CommitCheckpoint(shard).ok());
  EXPECT_EQ((*core)->GetJobStatus().last_checkpoint().step(), 20);

  shard.set_generation(0);
  EXPECT_EQ((*core)->CommitCheckpoint(shard).code(), absl::StatusCode::kAborted);
  shard.set_generation(1);
  *shard.mutable_checkpoint() = Rec(15);
  EXPECT_EQ((*core)->CommitCheckpoint(shard).code(), absl::StatusCode::kFailedPrecondition)
      << "older than the committed step";
}

}  // namespace
}  // namespace tandem
