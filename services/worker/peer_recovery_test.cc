// Recovery of sharded strategies (zero1, zero2, zero3) from the ring
// neighbours' replicas (issue 34 item 1), through the worker: 3 trainers on
// threads, a replica every K = 5 steps (synchronous here: the step waits
// for the neighbour's acknowledgement, so the fault 2 steps later always
// finds the step-5 copies held; the background send is exercised by
// peer_link_test and tools/bench/faults.sh).
//
//  - A worker lost after step 7: the survivors agree on R = 5 (the newest
//    step every old rank's shard is held at: the lost rank's from its
//    successor's copy), reshard into world 2, redo 2 steps, train each
//    sample once, and end with parameters bit-identical to a run that
//    trains 5 steps at world 3, checkpoints and continues at world 2 from
//    that checkpoint: the replicas hold the same bytes a checkpoint shard
//    does, and the resharding keeps them whole, so exact equality holds.
//  - A worker and its replica holder (old ranks 1 and 2) lost together
//    after step 7: old rank 1's shard has no copy; the survivor says so,
//    restores the step-4 checkpoint, and ends as a run that drops both at
//    step 4 through the disk.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/worker/recovery_fixture.h"

namespace tandem {
namespace worker {
namespace {

class PeerRecoveryTest : public RecoveryFixture,
                         public ::testing::WithParamInterface<std::string> {};

TEST_P(PeerRecoveryTest, ALostWorkersShardComesBackFromItsNeighbour) {
  strategy_ = GetParam();
  const std::string name = absl::StrCat(strategy_, "_lost");
  const std::string state = TmpDir(name + "_state"), samples = TmpDir(name + "_samples");
  StartCoordinator(2, 3, absl::Seconds(2), state);
  std::vector<TrainerOptions> o;
  for (int i = 0; i < 3; ++i) o.push_back(Options(i, kSteps, TmpDir(name + "_ckpt"), samples));
  o[1].crash_after_step = 7;
  std::vector<TrainerRun> runs = RunTrainers(o);
  ASSERT_FALSE(runs[1].result.ok());
  for (int i : {0, 2}) {
    ASSERT_TRUE(runs[i].result.ok()) << runs[i].result.status();
    EXPECT_EQ(runs[i].result->steps, kSteps);
    EXPECT_EQ(runs[i].result->generations, 2);
  }
  EXPECT_EQ(runs[0].params, runs[2].params);
  const std::string recovered = Line("recovered from peer memory");
  EXPECT_TRUE(absl::StartsWith(recovered, "recovered from peer memory at step 5 (2 steps redone)"))
      << AllLines();
  EXPECT_TRUE(absl::StrContains(recovered, "with 2 worker(s); 1 shard(s) from a neighbour's copy"))
      << recovered;
  EXPECT_EQ(Line("resumed from"), "");

  const std::string ref_samples = TmpDir(name + "_ref_samples");
  std::vector<TrainerRun> ref = ThroughTheDisk(name + "_ref", 3, 5, 2, ref_samples);
  ASSERT_EQ(ref.size(), 2u);
  ASSERT_EQ(runs[0].params.size(), ref[0].params.size());
  EXPECT_TRUE(runs[0].params == ref[0].params)
      << "recovered from peer memory != dropped the worker at step 5 via the disk";
  ExpectSameSamplesOnce(Samples(samples, 3), Samples(ref_samples, 3));
}

INSTANTIATE_TEST_SUITE_P(Zero, PeerRecoveryTest, ::testing::Values("zero1", "zero2", "zero3"));

class PeerRecoveryTwoFaultsTest : public RecoveryFixture {};

TEST_F(PeerRecoveryTwoFaultsTest, AWorkerAndItsReplicaHolderLostFallBackToTheDisk) {
  strategy_ = "zero1";
  checkpoint_every_ = 4;
  const std::string state = TmpDir("two_state"), samples = TmpDir("two_samples");
  const std::string ckpt = TmpDir("two_ckpt");
  StartCoordinator(1, 3, absl::Seconds(2), state);
  std::vector<TrainerOptions> o;
  for (int i = 0; i < 3; ++i) o.push_back(Options(i, kSteps, ckpt, samples));
  o[1].crash_after_step = 7;
  o[2].crash_after_step = 7;
  std::vector<TrainerRun> runs = RunTrainers(o);
  ASSERT_FALSE(runs[1].result.ok());
  ASSERT_FALSE(runs[2].result.ok());
  ASSERT_TRUE(runs[0].result.ok()) << runs[0].result.status();
  EXPECT_EQ(runs[0].result->steps, kSteps);
  EXPECT_NE(Line("peer memory cannot serve: old rank 1's shard at step 5 is held by no survivor: "
                 "rank 2, which held its replica, was lost too; restoring from the disk checkpoint"),
            "")
      << AllLines();
  const std::string resumed = Line("resumed from");
  EXPECT_TRUE(absl::StrContains(resumed, " at step 4 ")) << resumed;
  EXPECT_TRUE(absl::StrContains(resumed, "with 1 worker(s) (3 steps redone)")) << resumed;
  EXPECT_EQ(Line("recovered from peer memory"), "");

  const std::string ref_samples = TmpDir("two_ref_samples");
  std::vector<TrainerRun> ref = ThroughTheDisk("two_ref", 3, 4, 1, ref_samples);
  ASSERT_EQ(ref.size(), 1u);
  EXPECT_TRUE(runs[0].params == ref[0].params)
      << "the fallback != dropped both workers at step 4 via the disk";
  ExpectSameSamplesOnce(Samples(samples, 3), Samples(ref_samples, 3));
}

}  // namespace
}  // namespace worker
}  // namespace tandem
