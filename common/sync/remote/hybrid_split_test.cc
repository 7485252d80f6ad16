// ring_share's choice (hybrid_split.h): the auto formula at the layouts
// issue 33 names, rounding to whole units with at least one left to the
// servers, and bad values refused with the reason.
#include "common/sync/remote/hybrid_split.h"

#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

TEST(AutoRingShare, BalancesNodeAndServerLinks) {
  // 4 nodes, 2 servers: node link 1.5 f + (1 - f) = server link 2 (1 - f).
  EXPECT_NEAR(AutoRingShare(4, 2), 0.4, 1e-12);
  const double f = AutoRingShare(4, 1);
  EXPECT_NEAR(1.5 * f + (1 - f), 4 * (1 - f), 1e-12);
  const double g = AutoRingShare(3, 2);
  EXPECT_NEAR(2.0 * 2 / 3 * g + (1 - g), 1.5 * (1 - g), 1e-12);
  // As many servers as nodes (or more), or one node: everything by servers.
  EXPECT_EQ(AutoRingShare(4, 4), 0);
  EXPECT_EQ(AutoRingShare(2, 3), 0);
  EXPECT_EQ(AutoRingShare(1, 1), 0);
}

TEST(DefaultRingShare, SplitsOnlyWhereNoReplicaIsLost) {
  EXPECT_EQ(DefaultRingShare(1, true, false), "auto");   // one server: no replica to lose
  EXPECT_EQ(DefaultRingShare(2, false, false), "auto");  // replicate=0
  EXPECT_EQ(DefaultRingShare(2, true, false), "0");      // replicas kept
  EXPECT_EQ(DefaultRingShare(4, true, false), "0");
  EXPECT_EQ(DefaultRingShare(1, true, true), "0");       // int8 pushes: no split
}

TEST(ChooseRingSplit, RoundsToWholeUnitsAndKeepsOneForTheServers) {
  auto s = ChooseRingSplit({"auto", 4, 2, 1000, 100});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ring_size, 400);
  EXPECT_NE(s->why.find("f = 0.400"), std::string::npos) << s->why;
  EXPECT_NE(s->why.find("400 of 1000"), std::string::npos) << s->why;
  s = ChooseRingSplit({"0.33", 4, 2, 1000, 100});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ring_size, 300);
  s = ChooseRingSplit({"0.99", 2, 1, 1000, 100});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ring_size, 900);  // one unit stays with the servers
  s = ChooseRingSplit({"0.5", 2, 1, 50, 100});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ring_size, 0);  // smaller than a unit: all through the servers
  s = ChooseRingSplit({"auto", 4, 4, 1000, 100});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ring_size, 0);
  EXPECT_NE(s->why.find("f = 0"), std::string::npos) << s->why;
}

TEST(ChooseRingSplit, RefusesBadValues) {
  for (const char* bad : {"1", "-0.1", "x", "nan", ""}) {
    auto s = ChooseRingSplit({bad, 4, 2, 1000, 100});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("ring_share must be auto or a share"), std::string::npos);
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
