// AgreeOnStep on 3 Gloo ranks (a thread each): a command one rank heard is
// seen by all, losses and gradient norms are summed, rank 0's wanted batch
// arrives whole, and a quiet step decides nothing.
#include "services/worker/step_vote.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/comm/testing/gloo_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

TEST(StepVote, OneRanksCommandReachesEveryRankAndSumsAddUp) {
  std::vector<StepVote> agreed(3);
  auto results = comm_testing::RunGlooRanks(3, [&](int rank, Communicator& c) -> absl::Status {
    StepVote mine;
    mine.stop = rank == 2;
    mine.loss = 0.5f * static_cast<float>(rank + 1);
    mine.wanted_global_batch = rank == 0 ? 96 : 0;
    mine.local_grad_sum_sq = static_cast<float>(rank);
    absl::StatusOr<StepVote> all = AgreeOnStep(c, mine);
    if (!all.ok()) return all.status();
    agreed[rank] = *all;
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_TRUE(agreed[r].stop);
    EXPECT_FALSE(agreed[r].rejoin);
    EXPECT_FALSE(agreed[r].coordinator_lost);
    EXPECT_EQ(agreed[r].loss, 3.f);
    EXPECT_EQ(agreed[r].wanted_global_batch, 96);
    EXPECT_EQ(agreed[r].local_grad_sum_sq, 3.f);
  }
}

TEST(StepVote, AQuietStepDecidesNothing) {
  std::vector<StepVote> agreed(2);
  auto results = comm_testing::RunGlooRanks(2, [&](int rank, Communicator& c) -> absl::Status {
    StepVote mine;
    mine.rejoin = false;
    mine.loss = 1.f;
    absl::StatusOr<StepVote> all = AgreeOnStep(c, mine);
    if (!all.ok()) return all.status();
    agreed[rank] = *all;
    return absl::OkStatus();
  });
  for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
  for (const StepVote& v : agreed) {
    EXPECT_FALSE(v.stop || v.rejoin || v.coordinator_lost);
    EXPECT_EQ(v.wanted_global_batch, 0);
    EXPECT_EQ(v.loss, 2.f);
  }
}

}  // namespace
}  // namespace worker
}  // namespace tandem
