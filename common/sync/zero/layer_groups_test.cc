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
  // [20, 30) does not touch [0, 10), nor [40, 50) [20, 30).
  const LayerGroups g = GroupLayers({{0, 10}, {20, 30}, {40, 50}}, 1000);
  EXPECT_EQ(g.ranges(), (Ranges{{0, 10}, {20, 30}, {40, 50}}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int>{0, 1, 2}));
  // [10, 20) touches [20, 30) (joins it), and the short tail then touches [0, 10).
  const LayerGroups joined = GroupLayers({{0, 10}, {20, 30}, {10, 20}}, 1000);
  EXPECT_EQ(joined.ranges(), (Ranges{{0, 30}}));
}

TEST(GroupLayers, LayersLaidOutInBackwardOrderGroupToo) {
  // The MLP's layout: the first layer at the end of the vector.
  const LayerGroups g = GroupLayers({{14, 30}, {4, 14}, {0, 4}}, 20);
  EXPECT_EQ(g.ranges(), (Ranges{{0, 30}}));
  EXPECT_EQ(g.group_of_layer, (std::vector<int>{0, 0, 0}));
  const LayerGroups two = GroupLayers({{14, 30}, {4, 14}, {0, 4}}, 12);
  EXPECT_EQ(two.ranges(), (Ranges{{14, 30}, {0, 14}}));
}

TEST(GroupLayers, NoLayersNoGroups) {
  const LayerGroups g = GroupLayers({}, 8);
  EXPECT_TRUE(g.groups.empty());
  EXPECT_TRUE(g.group_of_layer.empty());
}

}  // namespace
}  // namespace sync
}  // namespace tandem
