#include "common/plan/machine_profile.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

TEST(MachineProfileTest, FormatParsesBackToTheSameProfile) {
  MachineProfile p;
  p.gemm_flops_per_s = 57.5e9;
  p.stream_bytes_per_s = 31e9;
  p.cores = 2;
  p.ring_round_4_s = 1.5e-3;
  p.ring_round_16_s = 6e-4;
  p.shard_round_16_s = 3.5e-3;
  p.source = "measured on test";
  auto back = ParseMachineProfile(FormatMachineProfile(p), "mem");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->gemm_flops_per_s, 57.5e9);
  EXPECT_DOUBLE_EQ(back->stream_bytes_per_s, 31e9);
  EXPECT_DOUBLE_EQ(back->link_alpha_s, p.link_alpha_s);
  EXPECT_EQ(back->cores, 2);
  EXPECT_DOUBLE_EQ(back->ring_round_4_s, 1.5e-3);
  EXPECT_DOUBLE_EQ(back->ring_round_16_s, 6e-4);
  EXPECT_DOUBLE_EQ(back->ring_round_2_s, 0);
  EXPECT_DOUBLE_EQ(back->shard_round_16_s, 3.5e-3);
  EXPECT_DOUBLE_EQ(back->shard_round_2_s, 0);
  // A profile saved before the ring rounds existed still loads: they stay
  // unmeasured and link_alpha_s is the round.
  auto old = ParseMachineProfile("link_alpha_s = 4e-6\n", "old.txt");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_DOUBLE_EQ(RingRoundSeconds(*old, 8), 4e-6);
  // ... and one from before the shard rounds: not counted (0).
  EXPECT_DOUBLE_EQ(ShardRoundSeconds(*old, 16), 0);
  EXPECT_EQ(back->source, "measured on test");
}

// Seconds per ring round: the measured sizes exactly, linear in log2(ranks)
// between them, the nearest measured one outside them.
TEST(MachineProfileTest, RingRoundsInterpolateInLogRanks) {
  MachineProfile p;
  p.ring_round_2_s = 4e-3;
  p.ring_round_4_s = 2e-3;
  p.ring_round_8_s = 1e-3;
  p.ring_round_16_s = 5e-4;
  EXPECT_DOUBLE_EQ(RingRoundSeconds(p, 4), 2e-3);
  EXPECT_DOUBLE_EQ(RingRoundSeconds(p, 16), 5e-4);
  EXPECT_NEAR(RingRoundSeconds(p, 6), 2e-3 - 1e-3 * (std::log2(6.0) - 2), 1e-12);
  EXPECT_DOUBLE_EQ(RingRoundSeconds(p, 1), 4e-3);
  EXPECT_DOUBLE_EQ(RingRoundSeconds(p, 64), 5e-4);
  // Only some measured: the gaps are bridged by the ones that are.
  p.ring_round_8_s = 0;
  EXPECT_DOUBLE_EQ(RingRoundSeconds(p, 8), 2e-3 + (5e-4 - 2e-3) * 0.5);
  // Between any two sizes the round lies between their rounds.
  for (int r = 2; r <= 16; ++r) {
    EXPECT_LE(RingRoundSeconds(p, r), 4e-3);
    EXPECT_GE(RingRoundSeconds(p, r), 5e-4);
  }
}

// Shard rounds interpolate the same way, independently of the ring's.
TEST(MachineProfileTest, ShardRoundsInterpolateInLogWorkers) {
  MachineProfile p;
  p.ring_round_4_s = 9;
  p.shard_round_4_s = 1e-3;
  p.shard_round_16_s = 5e-3;
  EXPECT_DOUBLE_EQ(ShardRoundSeconds(p, 2), 1e-3);
  EXPECT_DOUBLE_EQ(ShardRoundSeconds(p, 8), 3e-3);
  EXPECT_DOUBLE_EQ(ShardRoundSeconds(p, 32), 5e-3);
  EXPECT_DOUBLE_EQ(RingRoundSeconds(p, 8), 9);
}

TEST(MachineProfileTest, BadLinesNameFileLineAndKey) {
  auto unknown = ParseMachineProfile("# c\ngemm_flops_per_s = 1e9\nwarp = 9\n", "p.txt");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("p.txt:3: unknown key 'warp'"), std::string::npos)
      << unknown.status();
  auto negative = ParseMachineProfile("stream_bytes_per_s = -3\n", "p.txt");
  EXPECT_NE(negative.status().message().find("must be a positive number"), std::string::npos);
  auto garbled = ParseMachineProfile("just words\n", "p.txt");
  EXPECT_NE(garbled.status().message().find("expected `key = value`"), std::string::npos);
  EXPECT_EQ(LoadMachineProfile("/nonexistent/tandem/profile").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MachineProfileTest, ClusterChecks) {
  Cluster c;
  EXPECT_TRUE(ValidateCluster(c).ok());
  c.nodes = 0;
  EXPECT_FALSE(ValidateCluster(c).ok());
  c = Cluster{};
  c.servers = -1;
  EXPECT_FALSE(ValidateCluster(c).ok());
}

}  // namespace
}  // namespace plan
}  // namespace tandem
