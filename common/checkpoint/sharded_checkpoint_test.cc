#include "common/checkpoint/sharded_checkpoint.h"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "gtest/gtest.h"

namespace tandem {
namespace checkpoint {
namespace {

constexpr uint64_t kFingerprint = 0x1234;

std::string TestDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  EXPECT_TRUE(MakeDirectories(dir).ok());
  return dir;
}

// A full AdamW state over n values with distinct, reproducible contents.
struct FullState {
  std::vector<float> params, m, v;
  explicit FullState(int64_t n) : params(n), m(n), v(n) {
    std::mt19937 rng(5);
    std::normal_distribution<float> d;
    for (int64_t i = 0; i < n; ++i) {
      params[i] = d(rng);
      m[i] = d(rng);
      v[i] = std::abs(d(rng));
    }
  }
};

// Writes `full` as world shards of ceil(n / world) (the ZeRO layout) plus a
// manifest; returns the manifest path.
std::string WriteSharded(const std::string& dir, const FullState& full, int world, int64_t step) {
  const int64_t n = full.params.size();
  const int64_t s = (n + world - 1) / world;
  Manifest man;
  man.model_fingerprint = kFingerprint;
  man.step = step;
  man.total_params = n;
  man.world_size = world;
  man.strategy = "zero1";
  man.optimizer_name = "adamw";
  for (int r = 0; r < world; ++r) {
    const int64_t lo = std::min<int64_t>(r * s, n), hi = std::min<int64_t>(lo + s, n);
    if (hi <= lo) continue;
    CheckpointView v;
    v.model_fingerprint = kFingerprint;
    v.step = step;
    v.total_params = n;
    v.range_lo = lo;
    v.range_hi = hi;
    v.params = absl::MakeConstSpan(full.params.data() + lo, hi - lo);
    v.optimizer_name = "adamw";
    v.optimizer_state = {{"exp_avg", absl::MakeConstSpan(full.m.data() + lo, hi - lo)},
                         {"exp_avg_sq", absl::MakeConstSpan(full.v.data() + lo, hi - lo)}};
    const std::string blob = absl::StrCat("rank", r);
    v.blobs = {{"who", blob}};
    const std::string file = ShardFileName(step, r, world);
    EXPECT_TRUE(WriteCheckpoint(dir + "/" + file, v).ok());
    man.shards.push_back({lo, hi, file});
  }
  const std::string path = ManifestPath(dir, step);
  EXPECT_TRUE(WriteManifest(path, man).ok());
  return path;
}

ReadOptions Expect() {
  ReadOptions o;
  o.expected_model_fingerprint = kFingerprint;
  return o;
}

TEST(ShardedCheckpointTest, AssemblesTheWholeVectorBitForBit) {
  const FullState full(1001);
  const std::string path = WriteSharded(TestDir("assemble"), full, 4, 7);
  absl::StatusOr<Checkpoint> c = ReadShardedCheckpoint(path, Expect());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 7);
  EXPECT_EQ(c->range_lo, 0);
  EXPECT_EQ(c->range_hi, 1001);
  EXPECT_EQ(c->params, full.params);
  ASSERT_NE(c->FindOptimizerState("exp_avg"), nullptr);
  EXPECT_EQ(*c->FindOptimizerState("exp_avg"), full.m);
  EXPECT_EQ(*c->FindOptimizerState("exp_avg_sq"), full.v);
  ASSERT_NE(c->FindBlob("who"), nullptr);
  EXPECT_EQ(*c->FindBlob("who"), "rank0");  // the blobs of the shard at 0
}

// Save at N=4, load at N=3 (and 2, 1, 5): every new shard's optimizer state
// equals the saved values exactly, and the new shards together are the
// saved vector.
TEST(ShardedCheckpointTest, ReslicesForAnotherWorldSize) {
  const FullState full(1001);
  const std::string path = WriteSharded(TestDir("reslice"), full, 4, 3);
  absl::StatusOr<Checkpoint> c = ReadWholeCheckpoint(path, Expect());
  ASSERT_TRUE(c.ok()) << c.status();
  for (int world : {1, 2, 3, 5}) {
    const int64_t s = (1001 + world - 1) / world;
    std::vector<float> gathered_m, gathered_v;
    for (int r = 0; r < world; ++r) {
      const int64_t lo = std::min<int64_t>(r * s, 1001), hi = std::min<int64_t>(lo + s, 1001);
      auto opt = *optim::AdamW::Create({lo, hi}, optim::AdamWOptions());
      ASSERT_TRUE(RestoreOptimizerSlice(*c, opt.get()).ok());
      for (const optim::StateBuffer& b : opt->state()) {
        auto& dst = b.name == "exp_avg" ? gathered_m : gathered_v;
        dst.insert(dst.end(), b.data.begin(), b.data.end());
      }
    }
    EXPECT_EQ(gathered_m, full.m) << "world " << world;
    EXPECT_EQ(gathered_v, full.v) << "world " << world;
  }
}

TEST(ShardedCheckpointTest, MissingShardIsNotFoundNamingTheFile) {
  const FullState full(100);
  const std::string dir = TestDir("missing");
  const std::string path = WriteSharded(dir, full, 4, 1);
  const std::string gone = dir + "/" + ShardFileName(1, 2, 4);
  ASSERT_EQ(std::remove(gone.c_str()), 0);
  absl::StatusOr<Checkpoint> c = ReadShardedCheckpoint(path, Expect());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find(ShardFileName(1, 2, 4)), std::string::npos)
      << c.status();
}

TEST(ShardedCheckpointTest, ManifestOfAnotherModelIsRefused) {
  const FullState full(100);
  const std::string path = WriteSharded(TestDir("other_model"), full, 2, 1);
  ReadOptions o;
  o.expected_model_fingerprint = kFingerprint + 1;
  absl::StatusOr<Checkpoint> c = ReadShardedCheckpoint(path, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find(path), std::string::npos) << c.status();
}

TEST(ShardedCheckpointTest, EditedManifestFailsItsChecksum) {
  const FullState full(100);
  const std::string path = WriteSharded(TestDir("edited"), full, 2, 1);
  std::string text = *ReadFileToString(path);
  text.replace(text.find("total_params 100"), 16, "total_params 101");
  ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  absl::StatusOr<Manifest> m = ReadManifest(path, Expect());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(m.status().message().find("checksum"), std::string::npos) << m.status();
}

// A shard file from another layout under a manifest's name.
TEST(ShardedCheckpointTest, ShardThatDisagreesWithTheManifestIsDataLoss) {
  const FullState full(100);
  const std::string dir = TestDir("disagree");
  const std::string path = WriteSharded(dir, full, 2, 1);
  // Overwrite shard 1 ([50, 100)) with a shard of [40, 100).
  CheckpointView v;
  v.model_fingerprint = kFingerprint;
  v.step = 1;
  v.total_params = 100;
  v.range_lo = 40;
  v.range_hi = 100;
  v.params = absl::MakeConstSpan(full.params.data() + 40, 60);
  ASSERT_TRUE(WriteCheckpoint(dir + "/" + ShardFileName(1, 1, 2), v).ok());
  absl::StatusOr<Checkpoint> c = ReadShardedCheckpoint(path, Expect());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find(ShardFileName(1, 1, 2)), std::string::npos) << c.status();
}

TEST(ShardedCheckpointTest, WriterRefusesShardsThatDoNotTile) {
  Manifest m;
  m.total_params = 10;
  m.shards = {{0, 4, "a"}, {5, 10, "b"}};
  absl::Status s = WriteManifest(absl::StrCat(TestDir("gap"), "/x.manifest"), m);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("should start at 4"), std::string::npos) << s;
}

TEST(ShardedCheckpointTest, SingleFileMustCoverTheWholeVector) {
  const FullState full(100);
  const std::string dir = TestDir("single");
  CheckpointView v;
  v.model_fingerprint = kFingerprint;
  v.total_params = 100;
  v.range_lo = 0;
  v.range_hi = 50;
  v.params = absl::MakeConstSpan(full.params.data(), 50);
  ASSERT_TRUE(WriteCheckpoint(dir + "/half.tckpt", v).ok());
  absl::StatusOr<Checkpoint> c = ReadWholeCheckpoint(dir + "/half.tckpt", Expect());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShardedCheckpointTest, SliceOfAnotherOptimizerIsRefusedAndNothingChanges) {
  const FullState full(100);
  const std::string path = WriteSharded(TestDir("kind"), full, 2, 1);
  absl::StatusOr<Checkpoint> c = ReadWholeCheckpoint(path, Expect());
  ASSERT_TRUE(c.ok());
  optim::SgdOptions so;
  so.momentum = 0.9f;
  auto sgd = *optim::Sgd::Create({0, 50}, so);
  sgd->state()[0].data[0] = 42.f;
  EXPECT_EQ(RestoreOptimizerSlice(*c, sgd.get()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sgd->state()[0].data[0], 42.f);
}

}  // namespace
}  // namespace checkpoint
}  // namespace tandem
