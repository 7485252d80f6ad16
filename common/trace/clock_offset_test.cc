#include "common/trace/clock_offset.h"

#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace tandem {
namespace trace {
namespace {

TEST(ClockOffsetTest, TheSampleWithTheSmallestRoundTripWins) {
  // Reference = local + 1000; the second sample's reply was delayed on the
  // way back only (asymmetric), the third is the tightest.
  std::vector<ClockSample> s = {{0, 1000 + 50, 100}, {200, 1200 + 10, 600}, {700, 1700 + 5, 710}};
  absl::StatusOr<ClockEstimate> e = EstimateClockOffset(s);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->rtt_ns, 10);
  EXPECT_EQ(e->offset_ns, 1000);
  EXPECT_EQ(e->samples, 3);
}

TEST(ClockOffsetTest, FakeClocksWithRandomDelaysLandWithinHalfTheBestRoundTrip) {
  const int64_t true_offset = -7'000'000;  // the reference is 7 ms behind
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> delay(20'000, 2'000'000);  // 20 µs .. 2 ms each way
  int64_t local = 5'000'000'000;
  int64_t out_delay = 0;
  auto local_now = [&] { return local; };
  auto reference = [&]() -> absl::StatusOr<int64_t> {
    out_delay = delay(rng);
    local += out_delay;                       // request on the wire
    const int64_t stamped = local + true_offset;
    local += delay(rng);                      // reply on the wire
    return stamped;
  };
  absl::StatusOr<ClockEstimate> e = MeasureClockOffset(reference, 16, local_now);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->samples, 16);
  EXPECT_LE(std::abs(e->offset_ns - true_offset), e->rtt_ns / 2 + 1);
  EXPECT_LT(e->rtt_ns, 2'000'000);  // the minimum of 16, not a typical one
}

TEST(ClockOffsetTest, FailedSamplesAreSkippedAndAllFailingIsAnError) {
  int calls = 0;
  int64_t local = 0;
  auto local_now = [&] { return local += 10; };
  auto flaky = [&]() -> absl::StatusOr<int64_t> {
    if (++calls % 2 == 1) return absl::UnavailableError("coordinator down");
    return local + 100;
  };
  absl::StatusOr<ClockEstimate> e = MeasureClockOffset(flaky, 4, local_now);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->samples, 2);

  auto down = []() -> absl::StatusOr<int64_t> { return absl::UnavailableError("no route"); };
  absl::StatusOr<ClockEstimate> none = MeasureClockOffset(down, 3, local_now);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("no route"), std::string::npos);
  EXPECT_FALSE(MeasureClockOffset(down, 0).ok());
  EXPECT_FALSE(EstimateClockOffset({{10, 0, 5}}).ok());  // received before sent
}

}  // namespace
}  // namespace trace
}  // namespace tandem
