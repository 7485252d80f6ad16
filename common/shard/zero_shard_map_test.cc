#include "common/shard/zero_shard_map.h"

#include "gtest/gtest.h"

namespace tandem {
namespace shard {
namespace {

// Every (n, N) pair: the real ranges tile [0, n) in rank order, each shard
// is at most S long, and the padding is less than N.
TEST(ZeroShardMapTest, OwnedRangesTileTheVector) {
  for (int64_t n : {0, 1, 2, 3, 7, 8, 9, 100, 1001}) {
    for (int world : {1, 2, 3, 4, 5, 8, 16}) {
      ZeroShardMap map(n, world);
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const optim::ParamRange o = map.owned(r);
        EXPECT_EQ(o.lo, next) << "n=" << n << " N=" << world << " r=" << r;
        EXPECT_LE(o.size(), map.shard_size());
        for (int64_t i = o.lo; i < o.hi; ++i) ASSERT_EQ(map.owner(i), r);
        next = o.hi;
      }
      EXPECT_EQ(next, n);
      EXPECT_GE(map.padded_size(), n);
      EXPECT_LT(map.padded_size() - n, world);
    }
  }
}

TEST(ZeroShardMapTest, MoreRanksThanElementsLeavesTheLastRanksEmpty) {
  ZeroShardMap map(3, 5);
  EXPECT_EQ(map.shard_size(), 1);
  EXPECT_EQ(map.owned(2).lo, 2);
  EXPECT_EQ(map.owned(2).hi, 3);
  EXPECT_EQ(map.owned(3).size(), 0);
  EXPECT_EQ(map.owned(4).size(), 0);
}

TEST(ZeroShardMapTest, PaddingIsAtTheEnd) {
  ZeroShardMap map(10, 4);  // S = 3, padded 12
  EXPECT_EQ(map.shard_size(), 3);
  EXPECT_EQ(map.owned(0).lo, 0);
  EXPECT_EQ(map.owned(0).hi, 3);
  EXPECT_EQ(map.owned(3).lo, 9);
  EXPECT_EQ(map.owned(3).hi, 10);
}

}  // namespace
}  // namespace shard
}  // namespace tandem
