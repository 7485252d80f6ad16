#include "common/plan/calibrate.h"

#include "common/plan/ring_round.h"

#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

// Rates are machine-dependent; what must hold is that each measurement
// produces a positive, finite number from a real run and that bad input is
// refused. (Speed itself is the benchmark's business.)
TEST(CalibrateTest, MeasuresPositiveRates) {
  auto flops = MeasureModelFlops("mlp:64,32,10", 8, 2);
  ASSERT_TRUE(flops.ok()) << flops.status();
  EXPECT_GT(*flops, 0);
  auto gpt = MeasureModelFlops("gpt:layers=1,heads=2,width=16,context=8,vocab=32", 2, 2);
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  EXPECT_GT(*gpt, 0);
  EXPECT_GT(MeasureStreamBytesPerSecond(1 << 20, 2), 0);
  auto codec = MeasureCodecBytesPerSecond(1 << 16, 2);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_GT(*codec, 0);
  auto loop = MeasureLoopback(1 << 20, 2);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_GT(loop->bytes_per_s, 0);
  EXPECT_GT(loop->round_trip_s, 0);
}

// A real ring of 3 processes (Gloo over loopback TCP): a positive time per
// round and some CPU per round per process (no more than the round's wall
// time on every core); a ring of fewer than 2 is refused.
TEST(CalibrateTest, RingRoundIsMeasuredOnARealRing) {
  auto round = MeasureRingRound(3, 2, 1);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_GT(round->round_s, 0);
  EXPECT_LT(round->round_s, 10);  // seconds: a round, not a hang
  EXPECT_GT(round->cpu_s, 0);
  EXPECT_LT(round->cpu_s, 10);
  EXPECT_EQ(MeasureRingRound(1, 2, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureRingRound(2, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CalibrateTest, BadModelIsInvalidArgument) {
  CalibrateOptions o;
  o.model = "mlp:";
  EXPECT_EQ(Calibrate(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = CalibrateOptions{};
  o.batch = 0;
  EXPECT_EQ(Calibrate(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace plan
}  // namespace tandem
