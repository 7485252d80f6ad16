#include "tools/convert/convert.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/data/idx.h"
#include "gtest/gtest.h"
#include "services/dataserver/dataset.h"

namespace tandem {
namespace convert {
namespace {

std::string TmpDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string p = std::string(dir ? dir : "/tmp") + "/" + name;
  mkdir(p.c_str(), 0755);
  return p;
}

void ExpectSameSamples(const dataserver::Dataset& a, const dataserver::Dataset& b) {
  ASSERT_EQ(a.num_samples(), b.num_samples());
  ASSERT_EQ(a.feature_bytes(), b.feature_bytes());
  ASSERT_EQ(a.label_bytes(), b.label_bytes());
  EXPECT_EQ(a.info().feature_spec().SerializeAsString(),
            b.info().feature_spec().SerializeAsString());
  EXPECT_EQ(a.info().num_classes(), b.info().num_classes());
  std::vector<uint8_t> fa(a.feature_bytes()), fb(a.feature_bytes());
  std::vector<uint8_t> la(a.label_bytes()), lb(a.label_bytes());
  for (int64_t i = 0; i < a.num_samples(); ++i) {
    ASSERT_TRUE(a.ReadSample(i, fa.data(), la.data()).ok());
    ASSERT_TRUE(b.ReadSample(i, fb.data(), lb.data()).ok());
    ASSERT_EQ(fa, fb) << "sample " << i;
    ASSERT_EQ(la, lb) << "sample " << i;
  }
}

TEST(ConvertTest, IdxToShardsServesTheSameSamples) {
  const std::string dir = TmpDir("idx");
  data::IdxArray images, labels;
  images.dims = {25, 4, 4};
  labels.dims = {25};
  for (int i = 0; i < 25 * 16; ++i) images.data.push_back(i * 13 % 256);
  for (int i = 0; i < 25; ++i) labels.data.push_back(i % 10);
  ASSERT_TRUE(data::WriteIdxFile(dir + "/x-images-idx3-ubyte.gz", images).ok());
  ASSERT_TRUE(data::WriteIdxFile(dir + "/x-labels-idx1-ubyte.gz", labels).ok());
  const std::string out = TmpDir("idx_out");
  auto r = IdxToShards(dir + "/x-images-idx3-ubyte.gz",
                       dir + "/x-labels-idx1-ubyte.gz",
                       {.out_dir = out, .name = "x", .records_per_shard = 10});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records, 25);
  ASSERT_EQ(r->files.size(), 3u);
  EXPECT_TRUE(absl::EndsWith(r->files[2], "/x-00002-of-00003.tshard"));
  auto idx = dataserver::OpenDataset("x", dir + "/x");
  auto shards = dataserver::OpenDataset("x", out);
  ASSERT_TRUE(idx.ok() && shards.ok()) << shards.status();
  ExpectSameSamples(**idx, **shards);
}

TEST(ConvertTest, FashionMnistTestSetWhenInstalled) {
  const std::string fm = "/usr/share/datasets/fashion-mnist/t10k";
  auto idx = dataserver::OpenDataset("fm", fm);
  if (absl::IsNotFound(idx.status())) GTEST_SKIP() << idx.status();
  ASSERT_TRUE(idx.ok()) << idx.status();
  const std::string out = TmpDir("fm_out");
  auto r = IdxToShards(fm + "-images-idx3-ubyte.gz", fm + "-labels-idx1-ubyte.gz",
                       {.out_dir = out, .name = "t10k", .records_per_shard = 4000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->files.size(), 3u);
  auto shards = dataserver::OpenDataset("fm", out);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ((*shards)->num_samples(), 10000);
  ExpectSameSamples(**idx, **shards);
}

TEST(ConvertTest, TokensBecomeShiftedWindows) {
  const std::string dir = TmpDir("tok");
  std::vector<uint16_t> toks(23);
  for (int i = 0; i < 23; ++i) toks[i] = static_cast<uint16_t>(1000 + i);
  std::ofstream(dir + "/t.u16", std::ios::binary)
      .write(reinterpret_cast<const char*>(toks.data()), toks.size() * 2);
  const std::string out = TmpDir("tok_out");
  // seq_len 4: windows of 5 tokens -> 4 samples, 3 tokens dropped.
  auto r = TokensToShards(dir + "/t.u16", TokenType::kU16, 4,
                          {.out_dir = out, .name = "lm"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records, 4);
  EXPECT_EQ(r->dropped_tokens, 3);
  auto ds = dataserver::OpenDataset("lm", out);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->info().feature_spec().dtype(), v1::DTYPE_I32);
  EXPECT_EQ((*ds)->info().label_spec().shape(0), 4);
  int32_t f[4], l[4];
  ASSERT_TRUE((*ds)->ReadSample(2, reinterpret_cast<uint8_t*>(f),
                                reinterpret_cast<uint8_t*>(l)).ok());
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(f[k], 1000 + 10 + k);
    EXPECT_EQ(l[k], 1000 + 11 + k);
  }
}

TEST(ConvertTest, BadTokenInputs) {
  const std::string dir = TmpDir("badtok");
  std::ofstream(dir + "/odd.i32", std::ios::binary).write("abcdefg", 7);
  auto r = TokensToShards(dir + "/odd.i32", TokenType::kI32, 1,
                          {.out_dir = dir});
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "offset 4")) << r.status();
  EXPECT_TRUE(absl::IsNotFound(
      TokensToShards(dir + "/none", TokenType::kI32, 1, {.out_dir = dir}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      TokensToShards(dir + "/odd.i32", TokenType::kI32, 0, {.out_dir = dir}).status()));
}

TEST(ConvertTest, Synthetic) {
  const std::string out = TmpDir("syn");
  auto r = SyntheticShards(20, 1000, 3, {.out_dir = out, .name = "s",
                                         .records_per_shard = 8});
  ASSERT_TRUE(r.ok()) << r.status();
  auto ds = dataserver::OpenDataset("s", out);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_samples(), 20);
  EXPECT_EQ((*ds)->feature_bytes(), 1000);
}

}  // namespace
}  // namespace convert
}  // namespace tandem
