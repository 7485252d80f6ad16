// RecoveryMemory: the extra memory per rank and per shard server each
// strategy's recovery and background checkpoints cost.
#include "common/plan/recovery_memory.h"

#include "gtest/gtest.h"

namespace tandem {
namespace plan {
namespace {

PlanRequest Request(const std::string& optimizer, int servers) {
  PlanRequest r;
  r.model.parameters = 1000;
  r.optimizer = optimizer;
  r.cluster.servers = servers;
  return r;
}

Prediction Named(const std::string& s, int64_t server_bytes = 0) {
  Prediction p;
  p.strategy = s;
  p.server_bytes = server_bytes;
  return p;
}

TEST(RecoveryMemory, ReplicatedStrategiesKeepAnOptimizerCopyAndASnapshot) {
  const RecoveryMemory m = RecoveryMemoryOf(Request("adamw", 0), Named("allreduce"));
  EXPECT_EQ(m.rank_bytes, 2 * 1000 * 4);
  EXPECT_EQ(m.rank0_bytes, 3 * 1000 * 4);
  EXPECT_EQ(m.server_bytes, 0);
  const RecoveryMemory c = RecoveryMemoryOf(Request("sgd", 0), Named("compressed:int8"));
  EXPECT_EQ(c.rank_bytes, 1000 * 4);  // momentum 0.9 by default
  PlanRequest plain = Request("sgd", 0);
  plain.momentum = 0;
  EXPECT_EQ(RecoveryMemoryOf(plain, Named("hier")).rank_bytes, 0);
}

TEST(RecoveryMemory, ShardedStrategiesHoldFiveCopiesOfTheirShard) {
  PlanRequest r = Request("adamw", 0);
  r.cluster.nodes = 2;
  r.cluster.per_node = 2;
  const RecoveryMemory m = RecoveryMemoryOf(r, Named("zero2"));
  // (master + 2 AdamW buffers) x 1000 floats / 4 ranks: 4 peer-recovery
  // copies and the background checkpoint's snapshot.
  EXPECT_EQ(m.rank_bytes, 5 * 3 * 1000 * 4 / 4);
  EXPECT_EQ(m.rank0_bytes + m.server_bytes, 0);
  EXPECT_NE(FormatRecoveryMemory(m).find("MiB/worker (memory"), std::string::npos)
      << FormatRecoveryMemory(m);
}

TEST(RecoveryMemory, ShardServersHoldFiveRangesAndAGradientWithTwoServersAndOneWithOne) {
  const RecoveryMemory two = RecoveryMemoryOf(Request("adamw", 2), Named("ps", 6000));
  EXPECT_EQ(two.server_bytes, 5 * 6000 + 6000 / 3);  // AdamW: the gradient is a third of a range
  EXPECT_EQ(two.rank0_bytes, 2 * 1000 * 4);
  EXPECT_EQ(two.rank_bytes, 0);
  EXPECT_NE(FormatRecoveryMemory(two).find("MiB/server"), std::string::npos);
  EXPECT_EQ(two.source.rfind("memory", 0), 0u) << two.source;  // the default
  EXPECT_NE(two.source.find("replicate=0"), std::string::npos) << two.source;
  const RecoveryMemory one = RecoveryMemoryOf(Request("adamw", 1), Named("hybrid", 12000));
  EXPECT_EQ(one.server_bytes, 12000);  // its snapshot only
  EXPECT_NE(one.source.find("disk"), std::string::npos);
}

}  // namespace
}  // namespace plan
}  // namespace tandem
