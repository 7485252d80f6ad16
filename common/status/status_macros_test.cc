#include "common/status/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

absl::Status FailIf(bool fail) {
  if (fail) return absl::InvalidArgumentError("bad");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(int v) {
  if (v < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(v);
}

absl::Status Chain(bool fail, int* calls) {
  ++*calls;
  RETURN_IF_ERROR(FailIf(fail));
  ++*calls;
  return absl::OkStatus();
}

absl::StatusOr<int> Twice(int v) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(v));  // move-only value
  int out = 0;
  ASSIGN_OR_RETURN(out, absl::StatusOr<int>(*p * 2));  // existing variable
  return out;
}

TEST(StatusMacros, ReturnIfErrorStopsAtFirstError) {
  int calls = 0;
  EXPECT_TRUE(Chain(false, &calls).ok());
  EXPECT_EQ(calls, 2);
  calls = 0;
  absl::Status s = Chain(true, &calls);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 1);
}

TEST(StatusMacros, AssignOrReturnMovesValueOrPropagates) {
  EXPECT_EQ(*Twice(21), 42);
  absl::StatusOr<int> r = Twice(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(), "negative");
}

TEST(StatusMacros, AnnotateKeepsCodeAndPrefixesMessage) {
  absl::Status s = Annotate(absl::NotFoundError("no file"), "loading /x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading /x: no file");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "ctx").ok());
}

}  // namespace
}  // namespace tandem
