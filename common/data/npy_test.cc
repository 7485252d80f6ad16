#include "common/data/npy.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "common/io/file.h"
#include "gtest/gtest.h"

namespace tandem {
namespace data {
namespace {

// Files written by numpy 1.24 (np.save; v2_f32_2.npy by write_array with
// version=(2, 0)): see the test's data in BUILD.bazel.
std::string Fixture(const std::string& name) { return "common/data/testdata/" + name; }

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

template <typename T>
std::vector<T> Values(const NpyArray& a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

TEST(NpyTest, ReadsEachSupportedDtypeAndShape) {
  auto f32 = ReadNpyFile(Fixture("f32_2x3.npy"));
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(f32->dtype, NpyDType::kFloat32);
  EXPECT_EQ(f32->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(*f32), (std::vector<float>{0, 0.5, 1, 1.5, 2, 2.5}));

  auto u8 = ReadNpyFile(Fixture("u8_3x1x2x2.npy"));
  ASSERT_TRUE(u8.ok()) << u8.status();
  EXPECT_EQ(u8->dtype, NpyDType::kUInt8);
  EXPECT_EQ(u8->shape, (std::vector<int64_t>{3, 1, 2, 2}));
  EXPECT_EQ(Values<uint8_t>(*u8)[11], 11);

  auto i32 = ReadNpyFile(Fixture("i32_4.npy"));
  ASSERT_TRUE(i32.ok()) << i32.status();
  EXPECT_EQ(i32->dtype, NpyDType::kInt32);
  EXPECT_EQ(i32->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(Values<int32_t>(*i32), (std::vector<int32_t>{3, -1, 7, 2147483647}));

  auto i64 = ReadNpyFile(Fixture("i64_2x2.npy"));
  ASSERT_TRUE(i64.ok()) << i64.status();
  EXPECT_EQ(i64->dtype, NpyDType::kInt64);
  EXPECT_EQ(Values<int64_t>(*i64), (std::vector<int64_t>{1, 2, 3, int64_t{1} << 40}));

  auto scalar = ReadNpyFile(Fixture("f32_scalar.npy"));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(Values<float>(*scalar), (std::vector<float>{2.5f}));

  auto v2 = ReadNpyFile(Fixture("v2_f32_2.npy"));  // 4-byte header length
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(Values<float>(*v2), (std::vector<float>{1.5f, -2.0f}));
}

TEST(NpyTest, WritesWhatNumpyWrites) {
  auto f32 = ReadNpyFile(Fixture("f32_2x3.npy"));
  ASSERT_TRUE(f32.ok()) << f32.status();
  const std::string path = TmpPath("rewritten.npy");
  ASSERT_TRUE(WriteNpyFile(path, *f32).ok());
  EXPECT_EQ(*ReadFileToString(path), *ReadFileToString(Fixture("f32_2x3.npy")));
  NpyArray one;  // a 1-d shape is written "(n,)"
  one.dtype = NpyDType::kInt64;
  one.shape = {3};
  one.data.assign(24, '\x01');
  ASSERT_TRUE(WriteNpyFile(TmpPath("one.npy"), one).ok());
  auto back = ReadNpyFile(TmpPath("one.npy"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape, one.shape);
  EXPECT_EQ(back->data, one.data);
}

void ExpectError(const absl::StatusOr<NpyArray>& r, absl::StatusCode code,
                 const std::string& path, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << path;
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), path)) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), needle)) << r.status();
}

TEST(NpyTest, RefusesUnsupportedDtypesNamingTheSupportedOnes) {
  const std::string f64 = Fixture("f64_2.npy");
  ExpectError(ReadNpyFile(f64), absl::StatusCode::kInvalidArgument, f64, "'<f8' is not supported");
  ExpectError(ReadNpyFile(f64), absl::StatusCode::kInvalidArgument, f64,
              "supported: float32 ('<f4'), uint8 ('|u1'), int32 ('<i4'), int64 ('<i8')");
  const std::string big = Fixture("bigendian_i32_3.npy");
  ExpectError(ReadNpyFile(big), absl::StatusCode::kInvalidArgument, big, "big-endian");
}

TEST(NpyTest, RefusesFortranOrder) {
  const std::string f = Fixture("fortran_2x3.npy");
  ExpectError(ReadNpyFile(f), absl::StatusCode::kInvalidArgument, f, "np.ascontiguousarray");
}

TEST(NpyTest, RefusesTruncatedAndExtendedFiles) {
  const std::string whole = *ReadFileToString(Fixture("f32_2x3.npy"));
  const std::string cut = TmpPath("cut.npy");
  ASSERT_TRUE(WriteFileAtomically(cut, whole.substr(0, whole.size() - 5)).ok());
  ExpectError(ReadNpyFile(cut), absl::StatusCode::kDataLoss, cut, "truncated: shape (2, 3) of float32 needs 24 bytes");
  const std::string long_file = TmpPath("long.npy");
  ASSERT_TRUE(WriteFileAtomically(long_file, whole + "xx").ok());
  ExpectError(ReadNpyFile(long_file), absl::StatusCode::kDataLoss, long_file, "extra bytes");
  const std::string header_cut = TmpPath("header_cut.npy");
  ASSERT_TRUE(WriteFileAtomically(header_cut, whole.substr(0, 40)).ok());
  ExpectError(ReadNpyFile(header_cut), absl::StatusCode::kDataLoss, header_cut,
              "truncated in the .npy header");
}

TEST(NpyTest, RefusesOtherFilesAndMissingOnes) {
  const std::string text = TmpPath("text.npy");
  ASSERT_TRUE(WriteFileAtomically(text, "a,b,c\n1,2,3\n").ok());
  ExpectError(ReadNpyFile(text), absl::StatusCode::kInvalidArgument, text, "not a .npy file");
  const std::string none = TmpPath("none.npy");
  ExpectError(ReadNpyFile(none), absl::StatusCode::kNotFound, none, "no such file");
  std::string bad_shape = *ReadFileToString(Fixture("f32_2x3.npy"));
  bad_shape.replace(bad_shape.find("(2, 3)"), 6, "(2, x)");
  const std::string bs = TmpPath("bad_shape.npy");
  ASSERT_TRUE(WriteFileAtomically(bs, bad_shape).ok());
  ExpectError(ReadNpyFile(bs), absl::StatusCode::kInvalidArgument, bs, "bad dimension 'x'");
}

}  // namespace
}  // namespace data
}  // namespace tandem
