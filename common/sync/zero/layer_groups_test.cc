#include "common/sync/zero/layer_groups.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(GroupLayers, ZeroKeepsEveryLayerAlone) {
  const LayerGroups g = GroupLayers({{0, 10}, {10, 12}, {12, 40}}, 0);
  EXPECT_EQ(g.ranges(), (Ranges{{0, 10}, {10, 12}, {12, 40}}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int>{0, 1, 2}));
}

TEST(GroupLayers, ConsecutiveLayersJoinUntilTheMinimum) {
  // 4 + 4 reaches 8; 3 + 3 + 3 reaches 9; the 2-float tail joins the group before.
  const LayerGroups g = GroupLayers({{0, 4}, {4, 8}, {8, 11}, {11, 14}, {14, 17}, {17, 19}}, 8);
  EXPECT_EQ(g.ranges(), (Ranges{{0, 8}, {8, 19}}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int>{0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(g.groups[1].first, 2);
  EXPECT_EQ(g.groups[1].last, 5);
}

TEST(GroupLayers, ALargeLayerIsAGroupOfItsOwn) {
  const LayerGroups g = GroupLayers({{0, 100}, {100, 101}, {101, 300}}, 50);
  EXPECT_EQ(g.ranges(), (Ranges{{0, 100}, {100, 300}}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int>{0, 1, 1}));
}

TEST(GroupLayers, AMinimumAboveTheModelMakesOneGroup) {
  const LayerGroups g = GroupLayers({{0, 4}, {4, 8}, {8, 9}}, 1000);
  EXPECT_EQ(g.ranges(), (Ranges{{0, 9}}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int>{0, 0, 0}));
}

TEST(GroupLayers, LayersThatDoNotTouchStartANewGroup) {
  // Forward order that is not address order: [20, 30) does not follow [0, 10).
  const LayerGroups g = GroupLayers({{0, 10}, {20, 30}, {10, 20}}, 1000);
  EXPECT_EQ(g.ranges(), (Ranges{{0, 10}, {20, 30}, {10, 20}}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int>{0, 1, 2}));
}

TEST(GroupLayers, NoLayersNoGroups) {
  const LayerGroups g = GroupLayers({}, 8);
  EXPECT_TRUE(g.groups.empty());
  EXPECT_TRUE(g.group_of_layer.empty());
}

}  // namespace
}  // namespace sync
}  // namespace tandem
