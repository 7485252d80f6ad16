#include "common/data/record_shard.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/crc32c.h"
#include "gtest/gtest.h"

namespace tandem {
namespace data {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string Record(int i) {
  return std::string(static_cast<size_t>(i % 17), static_cast<char>('a' + i % 26)) +
         absl::StrCat("#", i);
}

// Writes `n` records and returns the path.
std::string WriteShard(const std::string& name, int n,
                       const std::string& metadata = "meta") {
  const std::string path = TmpPath(name);
  auto w = RecordShardWriter::Create(path, metadata);
  EXPECT_TRUE(w.ok()) << w.status();
  for (int i = 0; i < n; ++i) EXPECT_TRUE((*w)->Add(Record(i)).ok());
  EXPECT_TRUE((*w)->Finish().ok());
  return path;
}

void Overwrite(const std::string& path, long offset, const std::string& bytes) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(bytes.data(), bytes.size());
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Extending in pieces equals one pass.
  const std::string s = "the quick brown fox jumps over the lazy dog";
  EXPECT_EQ(Crc32cExtend(Crc32c(s.data(), 5), s.data() + 5, s.size() - 5),
            Crc32c(s.data(), s.size()));
}

TEST(RecordShardTest, RoundTrip) {
  const std::string path = WriteShard("rt.tshard", 100, "hello-meta");
  auto r = RecordShardReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->num_records(), 100);
  EXPECT_EQ((*r)->metadata(), "hello-meta");
  for (int i = 0; i < 100; ++i) {
    auto rec = (*r)->Read(i);
    ASSERT_TRUE(rec.ok()) << rec.status();
    EXPECT_EQ(*rec, Record(i));
    EXPECT_EQ((*r)->record_size(i), static_cast<int64_t>(Record(i).size()));
  }
  EXPECT_TRUE((*r)->VerifyAll().ok());
  EXPECT_TRUE(absl::IsOutOfRange((*r)->Read(100).status()));
  EXPECT_TRUE(absl::IsOutOfRange((*r)->Read(-1).status()));
  // Nothing left behind but the shard itself.
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
}

TEST(RecordShardTest, EmptyShardAndEmptyRecords) {
  const std::string path = WriteShard("empty.tshard", 0, "");
  auto r = RecordShardReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->num_records(), 0);

  const std::string p2 = TmpPath("emptyrec.tshard");
  auto w = RecordShardWriter::Create(p2, "m");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Add("").ok());
  ASSERT_TRUE((*w)->Add("x").ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto r2 = RecordShardReader::Open(p2);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(*(*r2)->Read(0), "");
  EXPECT_EQ(*(*r2)->Read(1), "x");
}

TEST(RecordShardTest, AbandonedWriterLeavesNoFile) {
  const std::string path = TmpPath("abandoned.tshard");
  {
    auto w = RecordShardWriter::Create(path, "m");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Add("data").ok());
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0);
  EXPECT_TRUE(absl::IsNotFound(RecordShardReader::Open(path).status()));
}

TEST(RecordShardTest, TruncatedFileNamesFileAndOffset) {
  const std::string path = WriteShard("trunc.tshard", 50);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (size_t keep : {size_t{0}, size_t{10}, size_t{63}, size_t{100},
                      bytes.size() - 1}) {
    const std::string p = TmpPath(absl::StrCat("trunc", keep, ".tshard"));
    std::ofstream(p, std::ios::binary).write(bytes.data(), keep);
    auto r = RecordShardReader::Open(p);
    ASSERT_FALSE(r.ok()) << keep;
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), p)) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(),
                                  absl::StrCat("offset ", keep)))
        << r.status();
  }
}

TEST(RecordShardTest, CorruptRecordNamesRecordAndOffset) {
  const std::string path = WriteShard("corrupt.tshard", 20);
  // Record 5 starts after the header, the 4-byte metadata and records 0..4.
  long off = kRecordShardHeaderBytes + 4;
  for (int i = 0; i < 5; ++i) off += Record(i).size();
  Overwrite(path, off, "Z");
  auto r = RecordShardReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();  // payloads are checked lazily
  EXPECT_TRUE((*r)->Read(4).ok());
  auto bad = (*r)->Read(5);
  EXPECT_TRUE(absl::IsDataLoss(bad.status()));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), path));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "record 5"));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), absl::StrCat(off)))
      << bad.status();
  EXPECT_TRUE(absl::IsDataLoss((*r)->VerifyAll()));
  // With verification off the bytes come back as stored.
  auto r2 = RecordShardReader::Open(path, {.verify_checksums = false});
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE((*r2)->Read(5).ok());
}

TEST(RecordShardTest, CorruptHeaderIndexAndMagic) {
  const std::string path = WriteShard("hdr.tshard", 10);
  const std::string copy = TmpPath("hdr2.tshard");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto with_byte = [&](long offset, char c) {
    std::string b = bytes;
    b[offset] = c;
    std::ofstream(copy, std::ios::binary | std::ios::trunc)
        .write(b.data(), b.size());
    return RecordShardReader::Open(copy).status();
  };
  EXPECT_TRUE(absl::IsInvalidArgument(with_byte(0, 'X')));
  absl::Status s = with_byte(20, 1);  // num_records changed: header crc
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "header checksum")) << s;
  s = with_byte(bytes.size() - 5, 0x7f);  // inside the index
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "index checksum")) << s;
  s = with_byte(kRecordShardHeaderBytes + 1, '!');  // metadata
  EXPECT_TRUE(absl::StrContains(s.message(), "metadata checksum")) << s;
}

TEST(RecordShardTest, NotAShard) {
  const std::string p = TmpPath("text.tshard");
  std::ofstream(p) << std::string(200, 'x');
  auto r = RecordShardReader::Open(p);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), p));
}

}  // namespace
}  // namespace data
}  // namespace tandem
