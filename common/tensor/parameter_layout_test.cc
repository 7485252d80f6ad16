#include "common/tensor/parameter_layout.h"

#include "gtest/gtest.h"

namespace tandem {
namespace tensor {
namespace {

TEST(ParameterLayoutTest, OffsetsAreAlignedIncreasingAndSizesMultiply) {
  ParameterLayout layout;
  EXPECT_EQ(layout.Add("b", {3}, 0), 0);
  EXPECT_EQ(layout.Add("w", {3, 5}, 0), 1);
  EXPECT_EQ(layout.Add("g", {7}, 1), 2);
  EXPECT_EQ(layout.param(0).offset, 0);
  EXPECT_EQ(layout.param(0).size, 3);
  EXPECT_EQ(layout.param(1).offset, 16);
  EXPECT_EQ(layout.param(1).size, 15);
  EXPECT_EQ(layout.param(2).offset, 32);
  EXPECT_EQ(layout.total_size(), 39);
  EXPECT_EQ(layout.num_elements(), 25);
  EXPECT_EQ(layout.param(2).group, 1);
}

TEST(ParameterLayoutTest, FindAndCompare) {
  ParameterLayout a;
  a.Add("x", {2, 2}, 0);
  a.Add("y", {4}, 0);
  ASSERT_TRUE(a.Find("y").ok());
  EXPECT_EQ(*a.Find("y"), 1);
  EXPECT_EQ(a.Find("z").status().code(), absl::StatusCode::kNotFound);

  ParameterLayout same;
  same.Add("x", {2, 2}, 0);
  same.Add("y", {4}, 0);
  EXPECT_TRUE(a.CheckSameAs(same).ok());
  EXPECT_EQ(a.Fingerprint(), same.Fingerprint());

  ParameterLayout other;
  other.Add("x", {2, 2}, 0);
  other.Add("y", {5}, 0);
  absl::Status s = a.CheckSameAs(other);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("y"), std::string::npos);
  EXPECT_NE(a.Fingerprint(), other.Fingerprint());

  ParameterLayout shorter;
  shorter.Add("x", {2, 2}, 0);
  EXPECT_FALSE(a.CheckSameAs(shorter).ok());
}

}  // namespace
}  // namespace tensor
}  // namespace tandem
