#include "tools/tandem/plan_rpc_calibrate.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace cli {
namespace {

// A real server process and real client processes: a round takes some
// time, and not seconds on loopback; a call costs some CPU, less than a
// second. (This test process starts no gRPC of its own before forking.)
TEST(ShardRoundTest, TimesARoundOfRealCalls) {
  for (int workers : {1, 3, 16}) {
    ShardRoundOptions o;
    o.workers = workers;
    o.round_trips = 5;
    o.repetitions = 1;
    absl::StatusOr<ShardRound> s = MeasureShardRound(o);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_GT(s->round_s, 0);
    EXPECT_LT(s->round_s, 1.0);
    EXPECT_GT(s->call_cpu_s, 0);
    EXPECT_LT(s->call_cpu_s, 1.0);
  }
}

TEST(ShardRoundTest, RefusesBadOptions) {
  ShardRoundOptions o;
  o.workers = 0;
  absl::StatusOr<ShardRound> s = MeasureShardRound(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(">= 1 worker"), std::string::npos) << s.status();
  o = {};
  o.round_trips = 0;
  EXPECT_EQ(MeasureShardRound(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cli
}  // namespace tandem
