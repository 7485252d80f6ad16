#include "common/plan/collective_cost.h"

#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

TEST(CollectiveCostTest, RingAllReduceSendsTwoNMinusOneOverNOfTheBuffer) {
  // 4 ranks, 100 MB: each rank sends 2 * 3/4 * 100 MB = 150 MB.
  EXPECT_DOUBLE_EQ(RingAllReduceBytes(4, 100e6), 150e6);
  // At 125 MB/s (1 Gbit/s) with alpha = 1 ms: 6 rounds + 1.2 s.
  const Link gbit{1e-3, 125e6};
  EXPECT_DOUBLE_EQ(RingAllReduceSeconds(4, 100e6, gbit), 6e-3 + 1.2);
}

TEST(CollectiveCostTest, ReduceScatterAndAllGatherAreHalfAnAllReduce) {
  const Link l{2e-6, 1e9};
  for (int n : {2, 3, 8}) {
    EXPECT_DOUBLE_EQ(RingReduceScatterSeconds(n, 64e6, l) + RingAllGatherSeconds(n, 64e6, l),
                     RingAllReduceSeconds(n, 64e6, l))
        << n;
  }
  // 3 ranks, 30 bytes: 2/3 of it leaves each rank.
  EXPECT_DOUBLE_EQ(RingReduceScatterBytes(3, 30), 20);
  EXPECT_DOUBLE_EQ(AllToAllSeconds(3, 30, Link{0, 10}), 2);
}

TEST(CollectiveCostTest, OneRankCostsNothing) {
  const Link l{1, 1};
  EXPECT_EQ(RingAllReduceSeconds(1, 1e9, l), 0);
  EXPECT_EQ(RingAllGatherSeconds(1, 1e9, l), 0);
  EXPECT_EQ(RingAllReduceBytes(1, 1e9), 0);
  EXPECT_DOUBLE_EQ(TransferSeconds(10, Link{0.5, 5}), 2.5);
}

}  // namespace
}  // namespace plan
}  // namespace tandem
