#include "common/plan/simulated_link.h"

#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

// At 1 Gbit/s the burst is 4 ms of the rate (500 KB), not the floor.
TEST(SimulatedLinkTest, BurstFollowsTheRate) {
  EXPECT_DOUBLE_EQ(SimulatedBurstSavedSeconds(0.100, {0.050}, 1e9), 0.004);
}

// The saving is capped by the burst (21 ms at 100 Mbit/s), by the transfer
// and by the idle time that refilled the bucket.
TEST(SimulatedLinkTest, SavesAtMostABurstTheTransferAndTheIdleTime) {
  const double burst_s = 256 * 1024 / 12.5e6;
  EXPECT_DOUBLE_EQ(SimulatedBurstSavedSeconds(0.100, {0.050}, 100e6), burst_s);  // burst
  EXPECT_DOUBLE_EQ(SimulatedBurstSavedSeconds(0.100, {0.002}, 100e6), 0.002);    // transfer
  EXPECT_DOUBLE_EQ(SimulatedBurstSavedSeconds(0.030, {0.024}, 100e6), 0.006);    // idle
  // Never below the link's rate; nothing for an unshaped link or no bytes.
  for (double step : {0.024, 0.03, 0.05, 0.1}) {
    EXPECT_GE(step - SimulatedBurstSavedSeconds(step, {0.024}, 100e6), 0.024 - 1e-15);
  }
  EXPECT_EQ(SimulatedBurstSavedSeconds(0.1, {0.05}, 0), 0);
  EXPECT_EQ(SimulatedBurstSavedSeconds(0.1, {0}, 100e6), 0);
  EXPECT_EQ(SimulatedBurstSavedSeconds(0.01, {0.02}, 100e6), 0);  // busier than the step
}

// Two links busy one after the other (pushes on the node's, pulls on the
// server's) each spend their own bucket, down to the busier one's transfer.
TEST(SimulatedLinkTest, EachLinkSpendsItsOwnBurst) {
  const double busy = 0.0163;  // 203 KB at 100 Mbit/s
  EXPECT_NEAR(SimulatedBurstSavedSeconds(0.040, {busy, busy}, 100e6), 0.040 - busy, 1e-15);
  EXPECT_NEAR(SimulatedBurstSavedSeconds(0.060, {busy, busy}, 100e6), 2 * busy, 1e-15);
  EXPECT_NEAR(SimulatedBurstSavedSeconds(0.060, {busy}, 100e6), busy, 1e-15);
}

}  // namespace
}  // namespace plan
}  // namespace tandem
