#include "common/plan/simulated_burst.h"

#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

// 256 KiB up to 524 Mbit/s (where 4 ms of the rate is 256 KiB), then 4 ms.
TEST(SimulatedBurstTest, FloorThenFourMillisecondsOfTheRate) {
  EXPECT_EQ(SimulatedBurstBytes(100'000'000), 256 * 1024);
  EXPECT_EQ(SimulatedBurstBytes(0), 256 * 1024);
  EXPECT_EQ(SimulatedBurstBytes(-5), 256 * 1024);
  EXPECT_EQ(SimulatedBurstBytes(1'000'000'000), 500'000);
  EXPECT_EQ(SimulatedBurstBytes(10'000'000'000), 5'000'000);
  EXPECT_EQ(SimulatedBurstBytes(int64_t{262144} * 8 * 250), 262144);
  EXPECT_EQ(SimulatedBurstBytes(int64_t{262145} * 8 * 250), 262145);
}

}  // namespace
}  // namespace plan
}  // namespace tandem
