#include "common/checkpoint/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/optim/adamw.h"
#include "common/optim/sgd.h"
#include "gtest/gtest.h"

namespace tandem {
namespace checkpoint {
namespace {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A shard [lo, hi) of a 1000-parameter model with AdamW state after 3 steps.
struct Fixture {
  static constexpr int64_t kTotal = 1000;
  static constexpr int64_t kLo = 123;
  static constexpr int64_t kHi = 480;
  uint64_t fingerprint = ModelFingerprint("mlp:784,1024,10 layout-v1");
  std::vector<float> params = RandomVector(kHi - kLo, 1);
  std::unique_ptr<optim::AdamW> opt;
  std::string cursor = std::string("epoch=3\0cursor=4096", 19);

  Fixture() {
    opt = std::move(optim::AdamW::Create({kLo, kHi}, optim::AdamWOptions()))
              .value();
    for (int s = 1; s <= 3; ++s) {
      const std::vector<float> g = RandomVector(kHi - kLo, 10 + s);
      optim::StepContext ctx;
      ctx.step = s;
      ctx.lr = 1e-2f;
      EXPECT_TRUE(opt->Step(params.data(), g.data(), kHi - kLo, ctx).ok());
    }
    // Values whose bits must survive: -0, a denormal, a NaN with payload.
    params[0] = -0.0f;
    params[1] = std::numeric_limits<float>::denorm_min();
    uint32_t nan_bits = 0x7FC01234u;
    std::memcpy(&params[2], &nan_bits, 4);
  }

  CheckpointView View() {
    CheckpointView v;
    v.model_fingerprint = fingerprint;
    v.step = 3;
    v.total_params = kTotal;
    v.range_lo = kLo;
    v.range_hi = kHi;
    v.params = params;
    AddOptimizerState(*opt, &v);
    v.blobs.emplace_back("data_cursor", cursor);
    v.blobs.emplace_back("empty", absl::string_view());
    return v;
  }

  ReadOptions Expect() const {
    ReadOptions o;
    o.expected_model_fingerprint = fingerprint;
    return o;
  }
};

TEST(CheckpointTest, RoundTripIsBitForBit) {
  Fixture f;
  const std::string path = TestDir("roundtrip") + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, f.View()).ok());
  auto c = ReadCheckpoint(path, f.Expect());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_fingerprint, f.fingerprint);
  EXPECT_EQ(c->step, 3);
  EXPECT_EQ(c->total_params, Fixture::kTotal);
  EXPECT_EQ(c->range_lo, Fixture::kLo);
  EXPECT_EQ(c->range_hi, Fixture::kHi);
  ASSERT_EQ(c->params.size(), f.params.size());
  EXPECT_EQ(0, std::memcmp(c->params.data(), f.params.data(),
                           f.params.size() * sizeof(float)));
  EXPECT_EQ(c->optimizer_name, "adamw");
  for (const optim::StateBuffer& b : f.opt->state()) {
    const std::vector<float>* s = c->FindOptimizerState(b.name);
    ASSERT_NE(s, nullptr) << b.name;
    ASSERT_EQ(s->size(), b.data.size());
    EXPECT_EQ(0, std::memcmp(s->data(), b.data.data(), s->size() * 4));
  }
  ASSERT_NE(c->FindBlob("data_cursor"), nullptr);
  EXPECT_EQ(*c->FindBlob("data_cursor"), f.cursor);
  ASSERT_NE(c->FindBlob("empty"), nullptr);
  EXPECT_TRUE(c->FindBlob("empty")->empty());
  EXPECT_EQ(c->FindBlob("missing"), nullptr);
}

// Resuming from a checkpoint continues exactly as the uninterrupted run.
TEST(CheckpointTest, RestoredOptimizerContinuesIdentically) {
  Fixture f;
  const std::string path = TestDir("resume") + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, f.View()).ok());
  auto c = ReadCheckpoint(path, f.Expect());
  ASSERT_TRUE(c.ok()) << c.status();
  auto fresh =
      std::move(optim::AdamW::Create({Fixture::kLo, Fixture::kHi},
                                     optim::AdamWOptions()))
          .value();
  ASSERT_TRUE(RestoreOptimizerState(*c, fresh.get()).ok());
  std::vector<float> resumed = c->params;
  std::vector<float> original = f.params;
  resumed[2] = original[2] = 1.0f;  // drop the NaN before stepping
  for (int s = 4; s <= 6; ++s) {
    const std::vector<float> g = RandomVector(Fixture::kHi - Fixture::kLo, s);
    optim::StepContext ctx;
    ctx.step = s;
    ctx.lr = 1e-2f;
    ASSERT_TRUE(f.opt->Step(original.data(), g.data(), g.size(), ctx).ok());
    ASSERT_TRUE(fresh->Step(resumed.data(), g.data(), g.size(), ctx).ok());
  }
  EXPECT_EQ(0, std::memcmp(original.data(), resumed.data(),
                           original.size() * sizeof(float)));
}

TEST(CheckpointTest, OverwriteIsAtomicAndLeavesNoTemporaryFiles) {
  Fixture f;
  const std::string dir = TestDir("overwrite");
  const std::string path = dir + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, f.View()).ok());
  CheckpointView v = f.View();
  v.step = 4;
  ASSERT_TRUE(WriteCheckpoint(path, v).ok());
  auto c = ReadCheckpoint(path, f.Expect());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 4);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"ckpt"});
}

TEST(CheckpointTest, TruncatedFileIsRefusedNamingIt) {
  Fixture f;
  const std::string dir = TestDir("truncated");
  const std::string good = dir + "/good";
  ASSERT_TRUE(WriteCheckpoint(good, f.View()).ok());
  const std::string bytes = ReadFile(good);
  const std::string path = dir + "/cut";
  for (size_t len : {size_t{0}, size_t{10}, size_t{64}, size_t{100},
                     bytes.size() / 2, bytes.size() - 16, bytes.size() - 1}) {
    WriteFile(path, bytes.substr(0, len));
    auto c = ReadCheckpoint(path, f.Expect());
    ASSERT_FALSE(c.ok()) << "length " << len;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << c.status();
    EXPECT_NE(c.status().message().find(path), absl::string_view::npos)
        << c.status();
  }
  // Trailing garbage is refused too.
  WriteFile(path, bytes + "x");
  EXPECT_EQ(ReadCheckpoint(path, f.Expect()).status().code(),
            absl::StatusCode::kDataLoss);
}

// Flipping any single bit anywhere in a (small) checkpoint is detected.
TEST(CheckpointTest, EveryBitFlipIsDetected) {
  CheckpointView v;
  v.model_fingerprint = 42;
  v.step = 7;
  v.total_params = 40;
  v.range_lo = 8;
  v.range_hi = 24;
  const std::vector<float> params = RandomVector(16, 2);
  v.params = params;
  auto sgd = std::move(optim::Sgd::Create({8, 24}, [] {
                         optim::SgdOptions o;
                         o.momentum = 0.9f;
                         return o;
                       }()))
                 .value();
  AddOptimizerState(*sgd, &v);
  v.blobs.emplace_back("cursor", "abc");
  const std::string dir = TestDir("bitflip");
  const std::string good = dir + "/good";
  ASSERT_TRUE(WriteCheckpoint(good, v).ok());
  const std::string bytes = ReadFile(good);
  ASSERT_TRUE(ReadCheckpoint(good, ReadOptions()).ok());
  const std::string path = dir + "/flipped";
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit : {0, 5}) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] ^ (1 << bit));
      WriteFile(path, b);
      auto c = ReadCheckpoint(path, ReadOptions());
      ASSERT_FALSE(c.ok()) << "flip of bit " << bit << " at byte " << i
                           << " went unnoticed";
      ASSERT_NE(c.status().message().find(path), absl::string_view::npos)
          << c.status();
    }
  }
  // A flip inside the params payload reports the section and its offset.
  std::string b = bytes;
  b[64 + 16 + 6 + 5] ^= 1;  // header, section header, "params", into data
  WriteFile(path, b);
  auto c = ReadCheckpoint(path, ReadOptions());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("section 'params' at offset 64"),
            absl::string_view::npos)
      << c.status();
}

TEST(CheckpointTest, CheckpointOfAnotherModelIsRefused) {
  Fixture f;
  const std::string path = TestDir("wrongmodel") + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, f.View()).ok());
  ReadOptions o;
  o.expected_model_fingerprint = ModelFingerprint("mlp:784,512,10 layout-v1");
  ASSERT_NE(*o.expected_model_fingerprint, f.fingerprint);
  auto c = ReadCheckpoint(path, o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("another model"), absl::string_view::npos);
  EXPECT_NE(c.status().message().find(path), absl::string_view::npos);
}

TEST(CheckpointTest, NotACheckpointAndMissingFile) {
  const std::string dir = TestDir("misc");
  auto missing = ReadCheckpoint(dir + "/nope", ReadOptions());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir + "/nope"),
            absl::string_view::npos);
  WriteFile(dir + "/text", std::string(200, 'x'));
  auto text = ReadCheckpoint(dir + "/text", ReadOptions());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(text.status().message().find("not a tandem checkpoint"),
            absl::string_view::npos);
  EXPECT_FALSE(ReadCheckpoint(dir, ReadOptions()).ok());  // a directory
}

TEST(CheckpointTest, WriterRejectsBadInputAndReportsIoErrors) {
  Fixture f;
  const std::string dir = TestDir("badinput");
  CheckpointView v = f.View();
  v.range_hi = Fixture::kHi + 1;  // params no longer match the range
  EXPECT_EQ(WriteCheckpoint(dir + "/a", v).code(),
            absl::StatusCode::kInvalidArgument);
  v = f.View();
  v.total_params = 10;  // range outside the vector
  EXPECT_EQ(WriteCheckpoint(dir + "/a", v).code(),
            absl::StatusCode::kInvalidArgument);
  v = f.View();
  v.blobs.emplace_back("data_cursor", "again");
  EXPECT_EQ(WriteCheckpoint(dir + "/a", v).code(),
            absl::StatusCode::kInvalidArgument);
  auto no_dir = WriteCheckpoint(dir + "/missing/sub/ckpt", f.View());
  EXPECT_EQ(no_dir.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(no_dir.message().find(dir + "/missing/sub/ckpt"),
            absl::string_view::npos);
  EXPECT_TRUE(ListDir(dir).empty());
}

TEST(CheckpointTest, RestoreRefusesMismatchedOptimizer) {
  Fixture f;
  const std::string path = TestDir("restore") + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, f.View()).ok());
  auto c = ReadCheckpoint(path, f.Expect());
  ASSERT_TRUE(c.ok());
  optim::SgdOptions so;
  so.momentum = 0.9f;
  auto sgd = std::move(optim::Sgd::Create({Fixture::kLo, Fixture::kHi}, so))
                 .value();
  auto s = RestoreOptimizerState(*c, sgd.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("'adamw'"), absl::string_view::npos);
  auto other_range =
      std::move(optim::AdamW::Create({0, Fixture::kHi - Fixture::kLo},
                                     optim::AdamWOptions()))
          .value();
  s = RestoreOptimizerState(*c, other_range.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("reshard"), absl::string_view::npos);
  for (const optim::StateBuffer& b : other_range->state())
    for (float x : b.data) ASSERT_EQ(x, 0.0f);  // untouched
}

TEST(CheckpointTest, FingerprintIsStableAndDiscriminates) {
  // FNV-1a 64 reference values.
  EXPECT_EQ(ModelFingerprint(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(ModelFingerprint("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(ModelFingerprint("mlp:784,1024,10"),
            ModelFingerprint("mlp:784,1024,11"));
}

}  // namespace
}  // namespace checkpoint
}  // namespace tandem

namespace tandem {
namespace checkpoint {
namespace {

// A writer that fails mid-file (the test hook, as a full disk or a crash
// would) leaves the previous file at the path whole and no temporary file.
TEST(CheckpointTest, AWriteFailingMidFileLeavesThePreviousFile) {
  Fixture f;
  const std::string dir = TestDir("midfile");
  const std::string path = dir + "/ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, f.View()).ok());
  const std::string before = ReadFile(path);
  // Large enough for several write(2) calls: the header is flushed first.
  const std::vector<float> big = RandomVector(600000, 7);
  CheckpointView v = f.View();
  v.step = 9;
  v.range_lo = 0;
  v.range_hi = static_cast<int64_t>(big.size());
  v.total_params = v.range_hi;
  v.params = big;
  v.optimizer_name.clear();
  v.optimizer_state.clear();
  WriteOptions wo;
  int calls = 0;
  uint64_t failed_at = 0;
  wo.before_write = [&](uint64_t offset, uint64_t) -> absl::Status {
    if (++calls < 2) return absl::OkStatus();
    failed_at = offset;
    return absl::ResourceExhaustedError("test hook: the disk filled up");
  };
  absl::Status s = WriteCheckpoint(path, v, wo);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_GT(failed_at, 0u) << "the hook should have failed after some bytes were written";
  EXPECT_EQ(ReadFile(path), before);
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"ckpt"});
  auto c = ReadCheckpoint(path, f.Expect());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 3);
}

}  // namespace
}  // namespace checkpoint
}  // namespace tandem
