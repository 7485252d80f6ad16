#include "common/shard/shard_layout.h"

#include "gtest/gtest.h"

namespace tandem {
namespace shard {
namespace {

// Chunks tile [0, n) in order, each inside its server's range and within
// the cap; server ranges are balanced (ZeroShardMap).
void CheckTiles(int64_t n, int servers, int64_t cap) {
  absl::StatusOr<ShardLayout> l = ShardLayout::Create(n, servers, cap);
  ASSERT_TRUE(l.ok()) << l.status();
  int64_t at = 0;
  for (int s = 0; s < servers; ++s) {
    const optim::ParamRange r = l->server_range(s);
    EXPECT_LE(r.size(), (n + servers - 1) / servers);
    for (int c = l->first_chunk(s); c < l->end_chunk(s); ++c) {
      const Chunk& ch = l->chunk(c);
      EXPECT_EQ(ch.lo, at) << "n=" << n << " servers=" << servers << " chunk " << c;
      EXPECT_GT(ch.size(), 0);
      EXPECT_LE(ch.size(), cap);
      EXPECT_GE(ch.lo, r.lo);
      EXPECT_LE(ch.hi, r.hi);
      EXPECT_EQ(ch.server, s);
      at = ch.hi;
    }
  }
  EXPECT_EQ(at, n);
}

TEST(ShardLayout, ChunksTileTheVectorAcrossServers) {
  for (int64_t n : {0, 1, 5, 1000, 1285, 4097}) {
    for (int servers : {1, 2, 3, 7}) {
      for (int64_t cap : {1, 3, 256, 1 << 20}) CheckTiles(n, servers, cap);
    }
  }
}

TEST(ShardLayout, ChunksOfAServerDifferByAtMostOne) {
  const std::vector<Chunk> c = ShardLayout::CutRange(10, 30, 6, 0);  // 20 floats, cap 6
  ASSERT_EQ(c.size(), 4u);
  for (const Chunk& ch : c) EXPECT_EQ(ch.size(), 5);
}

// ChunksMeeting finds exactly the chunks a range touches (checked against
// a scan over every chunk).
TEST(ShardLayout, ChunksMeetingARange) {
  absl::StatusOr<ShardLayout> l = ShardLayout::Create(1000, 3, 64);
  ASSERT_TRUE(l.ok()) << l.status();
  for (int64_t lo : {0, 1, 63, 64, 333, 334, 999, 1000}) {
    for (int64_t hi : {0, 1, 64, 65, 334, 700, 1000}) {
      int want_first = -1, want_end = -1;
      for (int c = 0; c < l->num_chunks(); ++c) {
        if (lo < hi && l->chunk(c).lo < hi && lo < l->chunk(c).hi) {
          if (want_first < 0) want_first = c;
          want_end = c + 1;
        }
      }
      int first = -1, end = -1;
      l->ChunksMeeting(lo, hi, &first, &end);
      if (want_first < 0) {
        EXPECT_EQ(first, end) << lo << ".." << hi;
      } else {
        EXPECT_EQ(first, want_first) << lo << ".." << hi;
        EXPECT_EQ(end, want_end) << lo << ".." << hi;
      }
    }
  }
}

TEST(ShardLayout, RefusesBadArguments) {
  EXPECT_FALSE(ShardLayout::Create(-1, 1, 1).ok());
  EXPECT_FALSE(ShardLayout::Create(10, 0, 1).ok());
  EXPECT_FALSE(ShardLayout::Create(10, 1, 0).ok());
  EXPECT_EQ(ShardLayout::ChunkElementsForMb(4), 1 << 20);
}

}  // namespace
}  // namespace shard
}  // namespace tandem
