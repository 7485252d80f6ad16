#include "common/data/sampler.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tandem {
namespace data {
namespace {

constexpr int64_t kN = 1001;

// The samples rank `rank` receives at `step` of `epoch`.
std::vector<int64_t> RankSamples(const SamplerConfig& c, int64_t epoch,
                                 int64_t step, int rank) {
  std::vector<int64_t> perm;
  EpochPermutation(c.num_samples, c.seed, epoch, c.shuffle, &perm);
  const IndexRange r = RankSlice(c, step, rank);
  return std::vector<int64_t>(perm.begin() + r.begin, perm.begin() + r.end);
}

TEST(SamplerTest, PermutationIsDeterministicAndValid) {
  std::vector<int64_t> a, b, c, d;
  EpochPermutation(kN, 42, 3, true, &a);
  EpochPermutation(kN, 42, 3, true, &b);
  EpochPermutation(kN, 42, 4, true, &c);
  EpochPermutation(kN, 43, 3, true, &d);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(sorted[i], i);
  std::vector<int64_t> ident;
  EpochPermutation(5, 42, 3, false, &ident);
  EXPECT_EQ(ident, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(SamplerTest, PermutationIsPinned) {
  // Checkpointed cursors are only meaningful if the order never changes
  // between builds: pin a few values of the generator.
  std::vector<int64_t> p;
  EpochPermutation(10, 1, 0, true, &p);
  EXPECT_EQ(p, (std::vector<int64_t>{7, 2, 5, 8, 3, 4, 1, 6, 0, 9}));
  EpochPermutation(10, 1, 1, true, &p);
  EXPECT_EQ(p, (std::vector<int64_t>{7, 0, 3, 1, 9, 2, 8, 6, 5, 4}));
}

struct Case {
  int64_t global_batch;
  Remainder remainder;
};

class ExactlyOnceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExactlyOnceTest, EveryWorldSizeDeliversEachSampleOnce) {
  const Case tc = GetParam();
  // Reference: the global batches of world size 1, per epoch.
  for (int64_t epoch : {0, 1}) {
    std::vector<std::vector<int64_t>> reference;
    for (int world : {1, 2, 3, 4, 7}) {
      SamplerConfig c{.num_samples = kN, .seed = 1234,
                      .global_batch_size = tc.global_batch,
                      .world_size = world, .remainder = tc.remainder};
      for (int r = 0; r < world; ++r) ASSERT_TRUE(ValidateSamplerConfig(c, r).ok());
      const int64_t steps = StepsPerEpoch(c);
      std::vector<int> seen(kN, 0);
      int64_t delivered = 0;
      for (int64_t s = 0; s < steps; ++s) {
        std::vector<int64_t> global;
        int64_t min_size = kN, max_size = 0;
        for (int r = 0; r < world; ++r) {
          const std::vector<int64_t> mine = RankSamples(c, epoch, s, r);
          min_size = std::min<int64_t>(min_size, mine.size());
          max_size = std::max<int64_t>(max_size, mine.size());
          ASSERT_LE(static_cast<int64_t>(mine.size()), MaxLocalBatchSize(c));
          for (int64_t id : mine) {
            ASSERT_GE(id, 0);
            ASSERT_LT(id, kN);
            ++seen[id];
          }
          global.insert(global.end(), mine.begin(), mine.end());
        }
        ASSERT_LE(max_size - min_size, 1) << "step " << s;
        delivered += global.size();
        if (tc.remainder == Remainder::kDrop || s + 1 < steps) {
          ASSERT_EQ(static_cast<int64_t>(global.size()), tc.global_batch);
        }
        // The global batch at step s is the same (in order, even) for every
        // world size; in particular for those dividing the batch.
        if (world == 1) {
          reference.push_back(global);
        } else {
          ASSERT_EQ(global, reference[s]) << "world " << world << " step " << s;
        }
      }
      for (int64_t id = 0; id < kN; ++id) {
        ASSERT_LE(seen[id], 1) << "sample " << id << " repeated, world " << world;
      }
      const int64_t expected = tc.remainder == Remainder::kDrop
                                   ? kN - kN % tc.global_batch
                                   : kN;
      EXPECT_EQ(delivered, expected) << "world " << world;
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), expected);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ExactlyOnceTest,
    ::testing::Values(Case{28, Remainder::kDrop}, Case{28, Remainder::kShortLast},
                      Case{32, Remainder::kDrop}, Case{32, Remainder::kShortLast},
                      Case{1, Remainder::kDrop}, Case{5, Remainder::kShortLast},
                      Case{1001, Remainder::kDrop},
                      Case{1000, Remainder::kShortLast},
                      Case{2000, Remainder::kShortLast}));

TEST(SamplerTest, DroppedRemainderChangesWithEpoch) {
  SamplerConfig c{.num_samples = kN, .seed = 9, .global_batch_size = 100};
  std::vector<int64_t> p0, p1;
  EpochPermutation(kN, c.seed, 0, true, &p0);
  EpochPermutation(kN, c.seed, 1, true, &p1);
  EXPECT_EQ(StepsPerEpoch(c), 10);
  // The dropped sample is the last position, different across epochs.
  EXPECT_NE(p0[1000], p1[1000]);
}

TEST(SamplerTest, ShortLastWithFewerSamplesThanRanks) {
  // 1001 = 31*32 + 9: the last batch has 9 samples for 16 ranks.
  SamplerConfig c{.num_samples = kN, .seed = 1, .global_batch_size = 32,
                  .world_size = 16, .remainder = Remainder::kShortLast};
  EXPECT_EQ(StepsPerEpoch(c), 32);
  int64_t total = 0;
  for (int r = 0; r < 16; ++r) {
    const IndexRange s = RankSlice(c, 31, r);
    EXPECT_EQ(s.size(), r < 9 ? 1 : 0);
    total += s.size();
  }
  EXPECT_EQ(total, 9);
}

TEST(SamplerTest, AdvanceWalksEpochsAndResumeEqualsUninterrupted) {
  SamplerConfig c{.num_samples = kN, .seed = 5, .global_batch_size = 64,
                  .world_size = 3, .remainder = Remainder::kShortLast};
  const int64_t steps = StepsPerEpoch(c);  // 16
  ASSERT_EQ(steps, 16);
  std::vector<Cursor> walk;
  Cursor cur{0, 0};
  for (int i = 0; i < 3 * steps; ++i) {
    ASSERT_TRUE(ValidateCursor(c, cur).ok());
    walk.push_back(cur);
    EXPECT_EQ(IsLastInEpoch(c, cur.step_in_epoch), (i % steps) == steps - 1);
    cur = Advance(c, cur);
  }
  EXPECT_EQ(cur, (Cursor{3, 0}));
  // Stopping after any batch and resuming from Advance(last) reproduces the
  // rest of the uninterrupted sequence.
  for (size_t stop = 0; stop + 1 < walk.size(); stop += 7) {
    Cursor resume = Advance(c, walk[stop]);
    for (size_t i = stop + 1; i < walk.size(); ++i) {
      ASSERT_EQ(resume, walk[i]);
      EXPECT_EQ(RankSamples(c, resume.epoch, resume.step_in_epoch, 2),
                RankSamples(c, walk[i].epoch, walk[i].step_in_epoch, 2));
      resume = Advance(c, resume);
    }
  }
}

TEST(SamplerTest, OffsetCutsTheRestOfTheEpoch) {
  SamplerConfig c{.num_samples = kN, .seed = 5, .global_batch_size = 64, .world_size = 3};
  // 1001 - 100 = 901 = 14*64 + 5: 14 whole batches and a short one of 5
  // (>= 3 ranks, kept under kDrop in an offset epoch).
  EXPECT_EQ(StepsInEpoch(c, 0), 15);  // 1001 = 15*64 + 41: dropped at offset 0
  EXPECT_EQ(StepsInEpoch(c, 100), 15);
  const IndexRange first = GlobalBatchRange(c, 0, 100);
  EXPECT_EQ(first.begin, 100);
  EXPECT_EQ(first.end, 164);
  const IndexRange last = GlobalBatchRange(c, 14, 100);
  EXPECT_EQ(last.begin, 996);
  EXPECT_EQ(last.end, kN);
  EXPECT_EQ(RankSlice(c, 14, 2, 100).size(), 1);
  // A tail of fewer samples than ranks is dropped under kDrop ...
  EXPECT_EQ(StepsInEpoch(c, kN - 2), 0);
  EXPECT_EQ(StepsInEpoch(c, kN - 66), 1);  // 66 = 64 + 2
  // ... and kept under kShortLast.
  SamplerConfig s = c;
  s.remainder = Remainder::kShortLast;
  EXPECT_EQ(StepsInEpoch(s, kN - 2), 1);
  // Advance keeps the offset within the epoch and drops it at the next.
  Cursor cur{0, 13, 100};
  cur = Advance(c, cur);
  EXPECT_EQ(cur, (Cursor{0, 14, 100}));
  EXPECT_TRUE(IsLastInEpoch(c, 14, 100));
  EXPECT_EQ(Advance(c, cur), (Cursor{1, 0, 0}));
  EXPECT_EQ(Position(c, Cursor{0, 3, 100}), 100 + 3 * 64);
  EXPECT_EQ(CursorAt(c, 2, 0), (Cursor{2, 0, 0}));
  EXPECT_EQ(CursorAt(c, 2, 500), (Cursor{2, 0, 500}));
  EXPECT_EQ(CursorAt(c, 2, kN - 1), (Cursor{3, 0, 0}));  // nothing left to cut
  // Bad offsets name the field.
  for (int64_t bad : {int64_t{-1}, kN, kN - 2}) {
    const absl::Status st = ValidateCursor(c, Cursor{0, 0, bad});
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad;
    EXPECT_NE(st.message().find("start_position"), std::string::npos) << st;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateCursor(c, Cursor{0, 15, 100})));
  EXPECT_TRUE(ValidateCursor(c, Cursor{0, 14, 100}).ok());
}

// A change of world size or global batch at a step boundary, resumed from
// the position reached: across the change every sample of the epoch once.
TEST(SamplerTest, ChangingWorldOrBatchAtAnOffsetCoversTheEpochOnce) {
  struct Change {
    int64_t batch0;
    int world0;
    int64_t steps0;  // steps before the change
    int64_t batch1;
    int world1;
  };
  for (const Change& ch : {Change{63, 3, 5, 84, 4}, Change{64, 2, 7, 96, 2},
                           Change{64, 2, 14, 96, 3}, Change{7, 1, 1, 1001, 7}}) {
    SamplerConfig c0{.num_samples = kN, .seed = 11, .global_batch_size = ch.batch0,
                     .world_size = ch.world0};
    SamplerConfig c1 = c0;
    c1.global_batch_size = ch.batch1;
    c1.world_size = ch.world1;
    std::multiset<int64_t> seen;
    Cursor cur{0, 0, 0};
    for (int64_t s = 0; s < ch.steps0; ++s) {
      for (int r = 0; r < ch.world0; ++r) {
        for (int64_t id : RankSamples(c0, 0, s, r)) seen.insert(id);
      }
      cur = Advance(c0, cur);
    }
    ASSERT_EQ(cur.epoch, 0);
    Cursor next = CursorAt(c1, 0, Position(c0, cur));
    ASSERT_TRUE(ValidateCursor(c1, next).ok());
    std::vector<int64_t> perm;
    EpochPermutation(kN, c0.seed, 0, true, &perm);
    while (next.epoch == 0) {
      for (int r = 0; r < ch.world1; ++r) {
        const IndexRange range = RankSlice(c1, next.step_in_epoch, r, next.offset);
        for (int64_t p = range.begin; p < range.end; ++p) seen.insert(perm[p]);
      }
      next = Advance(c1, next);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(kN)) << ch.batch0 << "->" << ch.batch1;
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), static_cast<size_t>(kN))
        << "repeated samples " << ch.batch0 << "->" << ch.batch1;
  }
}

TEST(SamplerTest, EpochOrderCachesPerEpoch) {
  SamplerConfig c{.num_samples = 50, .seed = 3, .global_batch_size = 5};
  EpochOrder order;
  std::vector<int64_t> want;
  EpochPermutation(50, 3, 2, true, &want);
  EXPECT_EQ(order.Get(c, 2), want);
  EpochPermutation(50, 3, 3, true, &want);
  EXPECT_EQ(order.Get(c, 3), want);
  c.shuffle = false;
  EXPECT_EQ(order.Get(c, 3)[7], 7);
}

TEST(SamplerTest, InvalidConfigs) {
  SamplerConfig c{.num_samples = kN, .seed = 1, .global_batch_size = 8,
                  .world_size = 4};
  EXPECT_TRUE(ValidateSamplerConfig(c, 3).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateSamplerConfig(c, 4)));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateSamplerConfig(c, -1)));
  SamplerConfig zero = c;
  zero.global_batch_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateSamplerConfig(zero, 0)));
  SamplerConfig world0 = c;
  world0.world_size = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateSamplerConfig(world0, 0)));
  SamplerConfig big = c;
  big.global_batch_size = kN + 1;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateSamplerConfig(big, 0)));
  big.remainder = Remainder::kShortLast;
  EXPECT_TRUE(ValidateSamplerConfig(big, 0).ok());
  SamplerConfig empty = c;
  empty.num_samples = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateSamplerConfig(empty, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateCursor(c, {0, 125})));  // 125 steps
  EXPECT_TRUE(ValidateCursor(c, {0, 124}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateCursor(c, {-1, 0})));
}

}  // namespace
}  // namespace data
}  // namespace tandem
