#include "services/dataserver/batch_stream.h"

#include <atomic>
#include <cstring>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tandem {
namespace dataserver {
namespace {

// Sample i: 3 feature bytes (i, i>>8, 7) and an i32 label i; optionally a
// read error at one index. Counts reads.
class FakeDataset final : public data::Dataset {
 public:
  explicit FakeDataset(int64_t n, int64_t fail_at = -1) : fail_at_(fail_at) {
    info_.set_name("fake");
    info_.set_num_samples(n);
    info_.mutable_feature_spec()->set_dtype(v1::DTYPE_U8);
    info_.mutable_feature_spec()->add_shape(3);
    info_.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  }
  const v1::DatasetInfo& info() const override { return info_; }
  absl::Status ReadSample(int64_t i, uint8_t* f, uint8_t* l) const override {
    ++reads;
    if (i == fail_at_) return absl::DataLossError("fake.tshard: bad record at offset 99");
    f[0] = static_cast<uint8_t>(i);
    f[1] = static_cast<uint8_t>(i >> 8);
    f[2] = 7;
    const int32_t label = static_cast<int32_t>(i);
    std::memcpy(l, &label, 4);
    return absl::OkStatus();
  }
  mutable std::atomic<int64_t> reads{0};

 private:
  v1::DatasetInfo info_;
  int64_t fail_at_;
};

v1::StreamBatchesRequest Request(int64_t gbs, int rank, int world,
                                 v1::RemainderPolicy policy = v1::DROP) {
  v1::StreamBatchesRequest r;
  r.set_dataset("fake");
  r.set_seed(77);
  r.set_global_batch_size(gbs);
  r.set_rank(rank);
  r.set_world_size(world);
  r.set_remainder(policy);
  r.set_shuffle(true);
  return r;
}

struct Received {
  int64_t epoch, step;
  bool last;
  std::vector<int64_t> ids;
  int64_t start_position = 0, end_position = 0;
};

// Pulls `count` batches, checking each batch's payload matches its ids.
std::vector<Received> Pull(const data::Dataset& ds, const v1::StreamBatchesRequest& req,
                           ThreadPool* pool, int64_t count, int depth = 3) {
  auto stream = BatchStream::Create(&ds, req, pool, {.prefetch_depth = depth});
  EXPECT_TRUE(stream.ok()) << stream.status();
  std::vector<Received> out;
  for (int64_t k = 0; k < count; ++k) {
    auto b = (*stream)->Next();
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) break;
    const v1::Batch& batch = **b;
    Received r{batch.epoch(), batch.step_in_epoch(), batch.last_in_epoch(),
               {batch.sample_ids().begin(), batch.sample_ids().end()},
               batch.start_position(), batch.end_position()};
    const int64_t n = r.ids.size();
    EXPECT_EQ(batch.features().shape(0), n);
    EXPECT_EQ(batch.features().shape(1), 3);
    EXPECT_EQ(batch.features().data().size(), static_cast<size_t>(3 * n));
    EXPECT_EQ(batch.labels().data().size(), static_cast<size_t>(4 * n));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* f = reinterpret_cast<const uint8_t*>(batch.features().data().data()) + 3 * i;
      EXPECT_EQ(f[0] | (f[1] << 8), r.ids[i]);
      int32_t label;
      std::memcpy(&label, batch.labels().data().data() + 4 * i, 4);
      EXPECT_EQ(label, r.ids[i]);
    }
    out.push_back(std::move(r));
    (*stream)->Release();
  }
  return out;
}

// Simulated slow storage: one decode thread packing 6 batches takes at
// least 6 read delays, and the batches are the same as without it.
TEST(BatchStreamTest, ReadDelaySlowsEveryBatchAndChangesNothingElse) {
  FakeDataset ds(100);
  ThreadPool pool(1);
  const v1::StreamBatchesRequest req = Request(10, 0, 1);
  auto stream = BatchStream::Create(&ds, req, &pool,
                                    {.prefetch_depth = 2, .read_delay = absl::Milliseconds(20)});
  ASSERT_TRUE(stream.ok()) << stream.status();
  const absl::Time start = absl::Now();
  std::vector<std::vector<int64_t>> slow;
  for (int k = 0; k < 6; ++k) {
    auto b = (*stream)->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    slow.push_back({(*b)->sample_ids().begin(), (*b)->sample_ids().end()});
    (*stream)->Release();
  }
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(6 * 20));
  const std::vector<Received> fast = Pull(ds, req, &pool, 6);
  ASSERT_EQ(fast.size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(slow[k], fast[k].ids) << k;
}

TEST(BatchStreamTest, ExactlyOncePerEpochAcrossWorldSizes) {
  FakeDataset ds(1001);
  ThreadPool pool(2);
  for (auto policy : {v1::DROP, v1::SHORT_LAST}) {
    const int64_t gbs = 28;
    const int64_t steps = policy == v1::DROP ? 1001 / 28 : (1001 + 27) / 28;
    std::vector<std::vector<int64_t>> reference;  // world 1, per step
    for (int world : {1, 2, 3, 4, 7}) {
      std::vector<std::vector<int64_t>> global(steps);
      std::multiset<int64_t> all;
      for (int rank = 0; rank < world; ++rank) {
        auto req = Request(gbs, rank, world, policy);
        req.set_max_batches(steps);
        const std::vector<Received> got = Pull(ds, req, &pool, steps);
        ASSERT_EQ(static_cast<int64_t>(got.size()), steps);
        for (int64_t s = 0; s < steps; ++s) {
          EXPECT_EQ(got[s].epoch, 0);
          EXPECT_EQ(got[s].step, s);
          EXPECT_EQ(got[s].last, s == steps - 1);
          global[s].insert(global[s].end(), got[s].ids.begin(), got[s].ids.end());
          all.insert(got[s].ids.begin(), got[s].ids.end());
        }
      }
      const size_t want = policy == v1::DROP ? 1001 - 1001 % 28 : 1001;
      EXPECT_EQ(all.size(), want) << "world " << world;
      EXPECT_EQ(std::set<int64_t>(all.begin(), all.end()).size(), want)
          << "duplicates at world " << world;
      if (world == 1) {
        reference = global;
      } else if (gbs % world == 0) {
        EXPECT_EQ(global, reference) << "world " << world;
      }
    }
  }
}

TEST(BatchStreamTest, ResumeFromCursorEqualsUninterrupted) {
  FakeDataset ds(1001);
  ThreadPool pool(3);
  // 35 steps per epoch: 80 batches cross two epoch boundaries.
  auto req = Request(28, 2, 4);
  const std::vector<Received> whole = Pull(ds, req, &pool, 80);
  for (int64_t stop : {1, 17, 34, 35, 36, 79}) {
    std::vector<Received> joined = Pull(ds, req, &pool, stop);
    const Received& last = joined.back();
    auto resume = req;
    resume.set_epoch(last.last ? last.epoch + 1 : last.epoch);
    resume.set_step_in_epoch(last.last ? 0 : last.step + 1);
    const std::vector<Received> rest = Pull(ds, resume, &pool, 80 - stop, 1);
    joined.insert(joined.end(), rest.begin(), rest.end());
    ASSERT_EQ(joined.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(joined[i].epoch, whole[i].epoch) << "stop " << stop << " i " << i;
      EXPECT_EQ(joined[i].step, whole[i].step);
      EXPECT_EQ(joined[i].ids, whole[i].ids);
    }
  }
  EXPECT_EQ(whole[79].epoch, 2);
}

// Generation 1 streams `steps0` global batches of gbs0 at world0; generation
// 2 resumes at the end_position the last batch reported, with gbs1 at world1,
// until the epoch ends. Returns every sample id of epoch 0 received.
std::multiset<int64_t> ChangeMidEpoch(const data::Dataset& ds, ThreadPool* pool, int64_t gbs0,
                                      int world0, int64_t steps0, int64_t gbs1, int world1,
                                      v1::RemainderPolicy policy) {
  std::multiset<int64_t> seen;
  int64_t position = -1;
  for (int rank = 0; rank < world0; ++rank) {
    auto req = Request(gbs0, rank, world0, policy);
    req.set_max_batches(steps0);
    for (const Received& r : Pull(ds, req, pool, steps0)) {
      EXPECT_EQ(r.epoch, 0);
      EXPECT_EQ(r.start_position, 0);
      EXPECT_EQ(r.end_position, (r.step + 1) * gbs0);
      seen.insert(r.ids.begin(), r.ids.end());
      position = r.end_position;
    }
  }
  EXPECT_EQ(position, steps0 * gbs0);
  // Batches the new slicing cuts from there (same count on every rank).
  auto first = Request(gbs1, 0, world1, policy);
  first.set_start_position(position);
  const int64_t rest = ds.info().num_samples() - position;
  int64_t steps1 = rest / gbs1;
  if (rest % gbs1 >= (policy == v1::SHORT_LAST ? 1 : world1)) ++steps1;
  for (int rank = 0; rank < world1; ++rank) {
    auto req = Request(gbs1, rank, world1, policy);
    req.set_start_position(position);
    const std::vector<Received> got = Pull(ds, req, pool, steps1);
    for (int64_t s = 0; s < static_cast<int64_t>(got.size()); ++s) {
      EXPECT_EQ(got[s].epoch, 0);
      EXPECT_EQ(got[s].step, s);
      EXPECT_EQ(got[s].start_position, position);
      EXPECT_EQ(got[s].end_position,
                std::min(position + (s + 1) * gbs1, ds.info().num_samples()));
      EXPECT_EQ(got[s].last, s == steps1 - 1);
      seen.insert(got[s].ids.begin(), got[s].ids.end());
    }
  }
  return seen;
}

void ExpectEachOnce(const std::multiset<int64_t>& seen, size_t n, const std::string& what) {
  EXPECT_EQ(seen.size(), n) << what << ": samples lost or repeated";
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), n) << what << ": repeats";
}

TEST(BatchStreamTest, WorldSizeThreeToFourMidEpochCoversEachSampleOnce) {
  FakeDataset ds(1200);
  ThreadPool pool(2);
  // 7 global batches of 60 at world 3 (420 samples), then batches of 60 at
  // world 4 from sample 420: 780 = 13 * 60.
  ExpectEachOnce(ChangeMidEpoch(ds, &pool, 60, 3, 7, 60, 4, v1::DROP), 1200, "3->4");
  // Per-rank batch kept (20): the global batch grows 60 -> 80 at an offset
  // that is not a multiple of it; 780 = 9*80 + 60, the short last kept.
  ExpectEachOnce(ChangeMidEpoch(ds, &pool, 60, 3, 7, 80, 4, v1::DROP), 1200, "3x20->4x20");
}

TEST(BatchStreamTest, GlobalBatch64To96MidEpochCoversEachSampleOnce) {
  FakeDataset ds(1001);
  ThreadPool pool(2);
  for (auto policy : {v1::DROP, v1::SHORT_LAST}) {
    // 5 batches of 64 (320), then 96 from sample 320: 681 = 7*96 + 9.
    ExpectEachOnce(ChangeMidEpoch(ds, &pool, 64, 2, 5, 96, 2, policy), 1001, "64->96");
    // And back down at another world size.
    ExpectEachOnce(ChangeMidEpoch(ds, &pool, 96, 3, 4, 64, 4, policy), 1001, "96->64");
  }
}

TEST(BatchStreamTest, StartPositionResumesAcrossEpochs) {
  FakeDataset ds(100);
  ThreadPool pool(1);
  auto req = Request(30, 0, 1);
  req.set_start_position(50);  // 50 left: a batch of 30 and a short one of 20
  const std::vector<Received> got = Pull(ds, req, &pool, 5);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].ids.size(), 30u);
  EXPECT_EQ(got[1].ids.size(), 20u);
  EXPECT_TRUE(got[1].last);
  EXPECT_EQ(got[1].end_position, 100);
  // The next epoch starts at 0 and drops its 10 leftover samples as usual.
  EXPECT_EQ(got[2].epoch, 1);
  EXPECT_EQ(got[2].start_position, 0);
  EXPECT_EQ(got[2].end_position, 30);
  EXPECT_TRUE(got[4].last);
  // Resuming inside the offset epoch (step 1 from 50) gives the same batch.
  auto resume = req;
  resume.set_step_in_epoch(1);
  const std::vector<Received> again = Pull(ds, resume, &pool, 1);
  EXPECT_EQ(again[0].ids, got[1].ids);
}

TEST(BatchStreamTest, MaxBatchesEndsWithOutOfRange) {
  FakeDataset ds(100);
  ThreadPool pool(1);
  auto req = Request(10, 0, 1);
  req.set_max_batches(3);
  auto stream = BatchStream::Create(&ds, req, &pool, {.prefetch_depth = 8});
  ASSERT_TRUE(stream.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*stream)->Next().ok());
    (*stream)->Release();
  }
  EXPECT_TRUE(absl::IsOutOfRange((*stream)->Next().status()));
}

TEST(BatchStreamTest, MemoryBoundedWhenConsumerStalls) {
  FakeDataset ds(10000);
  ThreadPool pool(4);
  {
    auto stream = BatchStream::Create(&ds, Request(50, 0, 1), &pool,
                                      {.prefetch_depth = 3});
    ASSERT_TRUE(stream.ok());
    ASSERT_TRUE((*stream)->Next().ok());  // never released
  }  // the destructor waits for in-flight packing
  EXPECT_LE(ds.reads.load(), 3 * 50);
}

TEST(BatchStreamTest, InvalidRequests) {
  FakeDataset ds(100);
  ThreadPool pool(1);
  auto create = [&](const v1::StreamBatchesRequest& r) {
    return BatchStream::Create(&ds, r, &pool, {}).status();
  };
  EXPECT_TRUE(absl::IsInvalidArgument(create(Request(10, 4, 4))));
  EXPECT_TRUE(absl::IsInvalidArgument(create(Request(10, -1, 4))));
  EXPECT_TRUE(absl::IsInvalidArgument(create(Request(0, 0, 1))));
  EXPECT_TRUE(absl::IsInvalidArgument(create(Request(10, 0, 0))));
  auto past = Request(10, 0, 1);
  past.set_step_in_epoch(10);  // 10 steps: 0..9
  EXPECT_TRUE(absl::IsInvalidArgument(create(past)));
  auto neg = Request(10, 0, 1);
  neg.set_max_batches(-1);
  EXPECT_TRUE(absl::IsInvalidArgument(create(neg)));
  for (int64_t bad : {int64_t{-5}, int64_t{100}, int64_t{1000}}) {
    auto pos = Request(10, 0, 1);
    pos.set_start_position(bad);
    const absl::Status st = create(pos);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << bad;
    EXPECT_TRUE(absl::StrContains(st.message(), "start_position")) << st;
  }
  auto tail = Request(10, 0, 4);
  tail.set_start_position(98);  // 2 samples for 4 ranks: no batch left
  EXPECT_TRUE(absl::IsInvalidArgument(create(tail)));
}

TEST(BatchStreamTest, ReadErrorSurfacesForThatBatch) {
  FakeDataset ds(100, /*fail_at=*/42);
  ThreadPool pool(2);
  auto req = Request(10, 0, 1);
  req.set_shuffle(false);  // natural order: sample 42 is in batch 4
  auto stream = BatchStream::Create(&ds, req, &pool, {.prefetch_depth = 2});
  ASSERT_TRUE(stream.ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE((*stream)->Next().ok()) << i;
    (*stream)->Release();
  }
  auto bad = (*stream)->Next();
  EXPECT_TRUE(absl::IsDataLoss(bad.status()));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "offset 99"));
}

TEST(BatchStreamTest, NormalizeToF32) {
  FakeDataset ds(20);
  ThreadPool pool(1);
  auto req = Request(4, 0, 1);
  req.set_shuffle(false);
  req.set_normalize_to_f32(true);
  auto stream = BatchStream::Create(&ds, req, &pool, {});
  ASSERT_TRUE(stream.ok()) << stream.status();
  auto b = (*stream)->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->features().dtype(), v1::DTYPE_F32);
  ASSERT_EQ((*b)->features().data().size(), 4u * 3 * 4);
  const float* f = reinterpret_cast<const float*>((*b)->features().data().data());
  EXPECT_FLOAT_EQ(f[3 * 3 + 0], 3.0f / 255.0f);  // sample 3, byte 0
  EXPECT_FLOAT_EQ(f[3 * 3 + 2], 7.0f / 255.0f);
}

}  // namespace
}  // namespace dataserver
}  // namespace tandem
