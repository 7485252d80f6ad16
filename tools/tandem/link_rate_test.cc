#include "tools/tandem/link_rate.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

TEST(LinkRateTest, ParsesTcUnits) {
  EXPECT_EQ(*ParseLinkRate("10gbit"), 10000000000LL);
  EXPECT_EQ(*ParseLinkRate("1Gbit"), 1000000000LL);
  EXPECT_EQ(*ParseLinkRate("100mbit"), 100000000LL);
  EXPECT_EQ(*ParseLinkRate("2.5gbit"), 2500000000LL);
  EXPECT_EQ(*ParseLinkRate("512kbit"), 512000LL);
  EXPECT_EQ(*ParseLinkRate("9000bit"), 9000LL);
}

TEST(LinkRateTest, RejectsWhatIsNotARateWithExamples) {
  for (const char* text : {"", "fast", "100", "100mb", "100mbps", "gbit", "-1gbit", "1.2.3mbit",
                           "1kbit", "2tbit"}) {
    auto r = ParseLinkRate(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "100mbit")) << r.status();
  }
}

TEST(LinkRateTest, FormatsTheShortestExactSpellingAndRoundTrips) {
  EXPECT_EQ(FormatLinkRate(1000000000LL), "1gbit");
  EXPECT_EQ(FormatLinkRate(2500000000LL), "2500mbit");
  EXPECT_EQ(FormatLinkRate(12345LL), "12345bit");
  for (int64_t bps : {8000LL, 100000000LL, 10000000000LL, 123456789LL}) {
    EXPECT_EQ(*ParseLinkRate(FormatLinkRate(bps)), bps);
  }
}

}  // namespace
}  // namespace cli
}  // namespace tandem
