// PlanPeerRestore, the decision every survivor computes from what all of
// them hold: the newest step at which every old rank's shard has a copy,
// who sends each shard, and why memory cannot serve when it cannot.
#include "services/worker/peer_restore.h"

#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

constexpr int64_t kGen = 4;

ReplicaMeta Meta(int64_t rank, int64_t world, int64_t step) {
  return ReplicaMeta{kGen, rank, world, step, 0, step * 48, rank * 10, rank * 10 + 10};
}

// Old rank `rank` of `world` survived with snapshots at `newer` and `older`
// and its predecessor's copy at `held` (-1: none).
ReplicaOffer Survivor(int64_t rank, int64_t world, int64_t newer, int64_t older, int64_t held) {
  ReplicaOffer o;
  o.slot[0] = Meta(rank, world, newer);
  o.slot[1] = Meta(rank, world, older);
  if (held >= 0) o.slot[2] = Meta((rank + world - 1) % world, world, held);
  o.fits = 1;
  return o;
}

TEST(PlanPeerRestore, ALostRanksShardComesFromItsSuccessor) {
  // Old ranks 0, 1, 2 at K = 5 and step 7: rank 1 lost; 0 and 2 survive.
  const std::vector<ReplicaOffer> offers = {Survivor(0, 3, 5, -1, 5), Survivor(2, 3, 5, -1, 5)};
  const PeerRestorePlan p = PlanPeerRestore(offers, /*committed_step=*/-1);
  ASSERT_EQ(p.step, 5) << p.reason;
  EXPECT_EQ(p.generation, kGen);
  // Each survivor sends its own shard; old rank 1's comes from the copy
  // its successor (old rank 2, new rank 1) holds.
  EXPECT_EQ(p.source, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(p.slot, (std::vector<int>{0, 2, 0}));
}

TEST(PlanPeerRestore, TakesTheNewestStepEveryShardIsHeldAt) {
  // Step 10's copy of rank 1 had not reached rank 2 when rank 1 was lost:
  // everyone still holds step 5 (the older own snapshot), so R = 5.
  const std::vector<ReplicaOffer> offers = {Survivor(0, 3, 10, 5, 10), Survivor(2, 3, 10, 5, 5)};
  const PeerRestorePlan p = PlanPeerRestore(offers, -1);
  ASSERT_EQ(p.step, 5) << p.reason;
}

TEST(PlanPeerRestore, AWorkerAndItsReplicaHolderLostFallsBackWithTheReason) {
  // Old ranks 1 and 2 lost: 1's shard was only in 2's memory.
  const std::vector<ReplicaOffer> offers = {Survivor(0, 3, 5, -1, 5)};
  const PeerRestorePlan p = PlanPeerRestore(offers, -1);
  EXPECT_EQ(p.step, -1);
  EXPECT_TRUE(absl::StrContains(p.reason, "old rank 1's shard at step 5 is held by no survivor"))
      << p.reason;
  EXPECT_TRUE(absl::StrContains(p.reason, "rank 2, which held its replica, was lost too"))
      << p.reason;
  EXPECT_TRUE(p.source.empty());
}

TEST(PlanPeerRestore, ANewerCommittedCheckpointWins) {
  const std::vector<ReplicaOffer> offers = {Survivor(0, 3, 5, -1, 5), Survivor(2, 3, 5, -1, 5)};
  const PeerRestorePlan p = PlanPeerRestore(offers, /*committed_step=*/6);
  EXPECT_EQ(p.step, -1);
  EXPECT_TRUE(absl::StrContains(p.reason, "committed checkpoint (step 6) is newer")) << p.reason;
}

TEST(PlanPeerRestore, AShardOfOneGenerationNeverStandsInForAnothers) {
  // Generation 3 (world 2) left a snapshot of its rank 1 at step 10; in
  // generation 4 (world 3) old rank 1 and its successor are lost. Gen 3's
  // rank 1 covered another range: no plan at step 10 may use it.
  ReplicaOffer a = Survivor(0, 3, 10, -1, 10);
  a.slot[1] = ReplicaMeta{3, 1, 2, 10, 0, 0, 15, 30};
  const PeerRestorePlan p = PlanPeerRestore({a}, -1);
  EXPECT_EQ(p.step, -1);
  EXPECT_TRUE(absl::StrContains(p.reason, "old rank 1's shard at step 10")) << p.reason;
}

TEST(PlanPeerRestore, AnEarlierGenerationServesWhenTheNewestCannot) {
  // Generation 5 (world 2) took step 10, but its rank 1's shard survives
  // nowhere; generation 4's step-5 shards (world 3) are all still held.
  ReplicaOffer a, b;
  a.slot[0] = ReplicaMeta{5, 0, 2, 10, 0, 0, 0, 15};
  a.slot[1] = ReplicaMeta{4, 0, 3, 5, 0, 0, 0, 10};
  a.slot[2] = ReplicaMeta{4, 2, 3, 5, 0, 0, 20, 30};  // the copy of gen 4's rank 2
  b.slot[0] = ReplicaMeta{4, 1, 3, 5, 0, 0, 10, 20};
  a.fits = b.fits = 1;
  const PeerRestorePlan p = PlanPeerRestore({a, b}, -1);
  ASSERT_EQ(p.step, 5) << p.reason;
  EXPECT_EQ(p.generation, 4);
  EXPECT_EQ(p.source, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(p.slot, (std::vector<int>{1, 0, 2}));
  EXPECT_TRUE(p.reason.empty());
}

TEST(PlanPeerRestore, NothingHeldIsNoReasonToComplain) {
  const PeerRestorePlan p = PlanPeerRestore({ReplicaOffer{}, ReplicaOffer{}}, -1);
  EXPECT_EQ(p.step, -1);
}

TEST(PlanPeerRestore, AnOptimizerThatDoesNotFitFallsBack) {
  std::vector<ReplicaOffer> offers = {Survivor(0, 3, 5, -1, 5), Survivor(2, 3, 5, -1, 5)};
  offers[1].fits = 0;
  const PeerRestorePlan p = PlanPeerRestore(offers, -1);
  EXPECT_EQ(p.step, -1);
  EXPECT_TRUE(absl::StrContains(p.reason, "rank 1's optimizer state does not match")) << p.reason;
}

}  // namespace
}  // namespace worker
}  // namespace tandem
