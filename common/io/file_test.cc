#include "common/io/file.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

std::string Tmp() { return std::getenv("TEST_TMPDIR"); }

TEST(File, AtomicWriteReplacesAndReadsBack) {
  const std::string path = Tmp() + "/state.bin";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, std::string("sec\0nd", 6)).ok());
  auto got = ReadFileToString(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::string("sec\0nd", 6));
}

TEST(File, MissingFileIsNotFoundAndNamesThePath) {
  auto got = ReadFileToString(Tmp() + "/nope");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("/nope"), std::string::npos);
}

TEST(File, WriteIntoMissingDirectoryFailsCleanly) {
  absl::Status s = WriteFileAtomically(Tmp() + "/no/such/dir/f", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
}

TEST(File, MakeDirectoriesCreatesParentsAndIsIdempotent) {
  const std::string dir = Tmp() + "/a/b/c";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/f", "x").ok());
  EXPECT_EQ(MakeDirectories(dir + "/f").code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem
