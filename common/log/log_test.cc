#include "common/log/log.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

int Touch(int* count) { return ++*count; }

TEST(Log, DisabledSeverityDoesNotEvaluateArguments) {
  log_internal::SetMinSeverity(log_internal::Severity::kError);
  int count = 0;
  LOG(INFO) << Touch(&count);
  EXPECT_EQ(count, 0);
  LOG(ERROR) << "expected test line " << Touch(&count);
  EXPECT_EQ(count, 1);
  log_internal::SetMinSeverity(log_internal::Severity::kInfo);
}

TEST(Log, CheckPassesWithoutEvaluatingMessage) {
  int count = 0;
  CHECK(1 + 1 == 2) << Touch(&count);
  EXPECT_EQ(count, 0);
}

TEST(LogDeathTest, FailedCheckAbortsWithCondition) {
  EXPECT_DEATH({ CHECK_EQ(1, 2) << "context"; }, "Check failed: \\(1\\) == \\(2\\) context");
}

}  // namespace
}  // namespace tandem
