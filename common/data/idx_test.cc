#include "common/data/idx.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem {
namespace data {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), bytes.size()),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

TEST(IdxTest, RoundTrip) {
  IdxArray a;
  a.dims = {3, 2, 2};
  for (int i = 0; i < 12; ++i) a.data.push_back(static_cast<uint8_t>(i * 7));
  const std::string path = TmpPath("rt.idx.gz");
  ASSERT_TRUE(WriteIdxFile(path, a).ok());
  auto b = ReadIdxFile(path);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dims, a.dims);
  EXPECT_EQ(b->data, a.data);
  EXPECT_EQ(b->num_items(), 3);
  EXPECT_EQ(b->item_bytes(), 4);
}

TEST(IdxTest, ReadsFashionMnistWhenInstalled) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  auto images = ReadIdxFile(dir + "t10k-images-idx3-ubyte.gz");
  if (absl::IsNotFound(images.status())) GTEST_SKIP() << images.status();
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{10000, 28, 28}));
  EXPECT_EQ(images->data.size(), 10000u * 784u);
  auto labels = ReadIdxFile(dir + "t10k-labels-idx1-ubyte.gz");
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->dims, (std::vector<int64_t>{10000}));
  int counts[10] = {};
  for (uint8_t l : labels->data) {
    ASSERT_LT(l, 10);
    ++counts[l];
  }
  for (int c : counts) EXPECT_EQ(c, 1000);  // the test set is balanced
}

TEST(IdxTest, MissingFileIsNotFound) {
  auto r = ReadIdxFile(TmpPath("does-not-exist.gz"));
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "does-not-exist.gz"));
}

TEST(IdxTest, TruncatedBodyNamesFileAndOffset) {
  // Header says 2x3 = 6 elements, only 4 present: truncated at offset 16.
  std::string bytes = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4};
  const std::string path = TmpPath("trunc.gz");
  WriteGz(path, bytes);
  auto r = ReadIdxFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), path));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "offset 16"))
      << r.status();
}

TEST(IdxTest, TruncatedHeader) {
  const std::string path = TmpPath("hdr.gz");
  WriteGz(path, std::string{0, 0, 8, 3, 0, 0});
  auto r = ReadIdxFile(path);
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "offset 6"))
      << r.status();
}

TEST(IdxTest, BadMagicAndType) {
  const std::string p1 = TmpPath("magic.gz");
  WriteGz(p1, std::string{1, 0, 8, 1, 0, 0, 0, 1, 5});
  EXPECT_TRUE(absl::IsInvalidArgument(ReadIdxFile(p1).status()));
  const std::string p2 = TmpPath("type.gz");
  WriteGz(p2, std::string{0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  auto r = ReadIdxFile(p2);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "0xd")) << r.status();
}

TEST(IdxTest, CorruptGzipIsDataLoss) {
  IdxArray a;
  a.dims = {1000};
  a.data.assign(1000, 0);
  for (int i = 0; i < 1000; ++i) a.data[i] = static_cast<uint8_t>(i * 31);
  const std::string path = TmpPath("corrupt.gz");
  ASSERT_TRUE(WriteIdxFile(path, a).ok());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(30);
  const char junk[8] = {'\x55', '\x55', '\x55', '\x55',
                        '\x55', '\x55', '\x55', '\x55'};
  f.write(junk, 8);
  f.close();
  auto r = ReadIdxFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), path)) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "offset"))
      << r.status();
}

}  // namespace
}  // namespace data
}  // namespace tandem
