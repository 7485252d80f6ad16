#include "common/data/dataset.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/data/idx.h"
#include "common/data/record_shard.h"
#include "gtest/gtest.h"

namespace tandem {
namespace data {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

// Writes a tiny IDX pair <prefix>-{images-idx3,labels-idx1}-ubyte.gz with n
// 2x3 images whose bytes encode the index and labels i % 4.
std::string WriteIdxPair(const std::string& prefix, int n) {
  IdxArray images, labels;
  images.dims = {n, 2, 3};
  labels.dims = {n};
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 6; ++k) images.data.push_back(static_cast<uint8_t>(i + k));
    labels.data.push_back(static_cast<uint8_t>(i % 4));
  }
  const std::string p = TmpPath(prefix);
  EXPECT_TRUE(WriteIdxFile(p + "-images-idx3-ubyte.gz", images).ok());
  EXPECT_TRUE(WriteIdxFile(p + "-labels-idx1-ubyte.gz", labels).ok());
  return p;
}

v1::DatasetInfo Spec(int feature_len) {
  v1::DatasetInfo info;
  info.mutable_feature_spec()->set_dtype(v1::DTYPE_U8);
  info.mutable_feature_spec()->add_shape(feature_len);
  info.mutable_label_spec()->set_dtype(v1::DTYPE_I32);
  info.set_num_classes(3);
  return info;
}

// A shard of `n` records (feature bytes = first + i, label = i).
std::string WriteShard(const std::string& path, int n, int first,
                       int feature_len = 5) {
  auto w = RecordShardWriter::Create(path, EncodeShardMetadata(Spec(feature_len)));
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < n; ++i) {
    std::string rec(feature_len, static_cast<char>(first + i));
    const int32_t label = first + i;
    rec.append(reinterpret_cast<const char*>(&label), 4);
    EXPECT_TRUE((*w)->Add(rec).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return path;
}

TEST(DatasetTest, IdxDataset) {
  const std::string prefix = WriteIdxPair("tiny", 9);
  auto ds = OpenDataset("tiny", prefix);
  ASSERT_TRUE(ds.ok()) << ds.status();
  const v1::DatasetInfo& info = (*ds)->info();
  EXPECT_EQ(info.name(), "tiny");
  EXPECT_EQ(info.num_samples(), 9);
  EXPECT_EQ(info.feature_spec().dtype(), v1::DTYPE_U8);
  EXPECT_EQ(info.feature_spec().shape_size(), 2);
  EXPECT_EQ(info.label_spec().dtype(), v1::DTYPE_I32);
  EXPECT_EQ(info.num_classes(), 4);
  EXPECT_EQ((*ds)->feature_bytes(), 6);
  EXPECT_EQ((*ds)->label_bytes(), 4);
  uint8_t f[6];
  int32_t label;
  ASSERT_TRUE((*ds)->ReadSample(7, f, reinterpret_cast<uint8_t*>(&label)).ok());
  EXPECT_EQ(f[0], 7);
  EXPECT_EQ(f[5], 12);
  EXPECT_EQ(label, 3);
}

TEST(DatasetTest, IdxLabelCountMismatch) {
  const std::string a = WriteIdxPair("a", 9);
  const std::string b = WriteIdxPair("b", 8);
  auto ds = OpenIdxDataset("x", a + "-images-idx3-ubyte.gz",
                           b + "-labels-idx1-ubyte.gz");
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
}

TEST(DatasetTest, ShardDirectorySpansShards) {
  const std::string dir = TmpPath("shards");
  mkdir(dir.c_str(), 0755);
  WriteShard(dir + "/d-00000-of-00002.tshard", 4, 10);
  WriteShard(dir + "/d-00001-of-00002.tshard", 3, 20);
  auto ds = OpenDataset("d", dir);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->num_samples(), 7);
  const int want[] = {10, 11, 12, 13, 20, 21, 22};
  for (int i = 0; i < 7; ++i) {
    uint8_t f[5];
    int32_t label;
    ASSERT_TRUE((*ds)->ReadSample(i, f, reinterpret_cast<uint8_t*>(&label)).ok());
    EXPECT_EQ(f[4], want[i]);
    EXPECT_EQ(label, want[i]);
  }
}

TEST(DatasetTest, CorruptRecordFailsReadSampleWithFileAndOffset) {
  const std::string path = WriteShard(TmpPath("c.tshard"), 4, 0);
  const std::string meta = EncodeShardMetadata(Spec(5));
  // Record 2 starts at header + metadata + 2 records of 9 bytes.
  const long off = kRecordShardHeaderBytes + meta.size() + 2 * 9;
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(off);
    f.write("\xff", 1);
  }
  auto ds = OpenDataset("c", path);
  ASSERT_TRUE(ds.ok()) << ds.status();
  uint8_t buf[16];
  EXPECT_TRUE((*ds)->ReadSample(1, buf, buf + 5).ok());
  absl::Status s = (*ds)->ReadSample(2, buf, buf + 5);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), path)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat(off))) << s;
}

TEST(DatasetTest, MismatchedShardSpecsRejected) {
  const std::string dir = TmpPath("mixed");
  mkdir(dir.c_str(), 0755);
  WriteShard(dir + "/a.tshard", 2, 0, 5);
  WriteShard(dir + "/b.tshard", 2, 0, 6);
  auto ds = OpenDataset("m", dir);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
}

TEST(DatasetTest, DescribeReadsTheDescriptionOpenWouldGive) {
  const std::string prefix = WriteIdxPair("described", 9);
  auto opened = OpenDataset("d", prefix);
  auto described = DescribeDataset("d", prefix);
  ASSERT_TRUE(opened.ok() && described.ok()) << opened.status() << described.status();
  EXPECT_EQ(described->SerializeAsString(), (*opened)->info().SerializeAsString());
  const std::string dir = TmpPath("described-shards");
  mkdir(dir.c_str(), 0755);
  WriteShard(dir + "/a.tshard", 4, 10, 6);
  auto shards = DescribeDataset("s", dir);
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(shards->num_samples(), 4);
  EXPECT_EQ(shards->feature_spec().shape(0), 6);
  EXPECT_EQ(shards->num_classes(), 3);
  auto missing = DescribeDataset("m", TmpPath("nothing-here"));
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "no such dataset")) << missing.status();
}

TEST(DatasetTest, MissingPathsAreNotFound) {
  EXPECT_TRUE(absl::IsNotFound(OpenDataset("x", TmpPath("nope")).status()));
  EXPECT_TRUE(
      absl::IsNotFound(OpenDataset("x", TmpPath("nope.tshard")).status()));
  const std::string empty = TmpPath("emptydir");
  mkdir(empty.c_str(), 0755);
  EXPECT_TRUE(absl::IsNotFound(OpenDataset("x", empty).status()));
}

TEST(DatasetTest, ShardWithoutDatasetMetadataRejected) {
  const std::string path = TmpPath("raw.tshard");
  auto w = RecordShardWriter::Create(path, "\xff\xff not a proto");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Add("x").ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto ds = OpenDataset("r", path);
  EXPECT_TRUE(absl::IsInvalidArgument(ds.status())) << ds.status();
  EXPECT_TRUE(absl::StrContains(ds.status().message(), path));
}

}  // namespace
}  // namespace data
}  // namespace tandem
