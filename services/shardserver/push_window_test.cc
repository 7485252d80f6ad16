// TANDEM_SHARD_PUSH_WINDOW_KB: unset keeps the default, a size in KiB
// becomes the window in bytes, 0 is gRPC's auto-tuned window, anything
// else is refused with a message naming the variable and the range.
#include "services/shardserver/push_window.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem {
namespace shardserver {
namespace {

TEST(PushWindow, UnsetOrEmptyKeepsTheDefault) {
  EXPECT_EQ(PushWindowBytes(nullptr, 64 << 10).value(), 64 << 10);
  EXPECT_EQ(PushWindowBytes("", 64 << 10).value(), 64 << 10);
}

TEST(PushWindow, ASizeInKibBecomesBytes) {
  EXPECT_EQ(PushWindowBytes("128", 64 << 10).value(), 128 << 10);
  EXPECT_EQ(PushWindowBytes("0", 64 << 10).value(), 0);
  EXPECT_EQ(PushWindowBytes("1048576", 64 << 10).value(), 1 << 30);
  EXPECT_EQ(DescribePushWindow(128 << 10), "push window 128 KiB (TANDEM_SHARD_PUSH_WINDOW_KB)");
  EXPECT_TRUE(absl::StrContains(DescribePushWindow(0), "auto-tuned"));
}

TEST(PushWindow, AnythingElseIsRefusedWithTheRange) {
  for (const char* bad : {"abc", "-1", "1048577", "64k", "1.5", "99999999999"}) {
    absl::StatusOr<int> w = PushWindowBytes(bad, 64 << 10);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(w.status().message(),
                                  std::string("TANDEM_SHARD_PUSH_WINDOW_KB=") + bad))
        << w.status();
    EXPECT_TRUE(absl::StrContains(w.status().message(), "0..1048576")) << w.status();
  }
}

}  // namespace
}  // namespace shardserver
}  // namespace tandem
