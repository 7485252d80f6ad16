// LayerGather at every node layout (one thread per rank, shm inside a node,
// Gloo across): 1x4, 2x2, 4x1, 3x1 and nodes of 2 and 1. For a range inside
// one shard, across shards, a group of layers and the whole vector, every
// rank ends with each owner's values bit for bit (its own piece untouched,
// the others' overwritten whatever they held), on the route the costs pick;
// several nodes of one rank, or unequal nodes, never broadcast; one node
// always does (shared memory).
#include "common/sync/zero/layer_gather.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

constexpr int64_t kSize = 1001;  // shards of 251 at 4 ranks, 334 at 3: padding at the end

float Value(int64_t i) { return 0.5f + static_cast<float>(i % 97) * 0.25f - (i % 3 == 0 ? 40 : 0); }

TEST(LayerGather, EveryRankGetsTheOwnersValuesAtEveryLayout) {
  const std::vector<std::vector<std::string>> layouts = {
      {"a", "a", "a", "a"}, {"a", "a", "b", "b"}, {"a", "b", "c", "d"}, {"a", "b", "c"}, {"a", "a", "b"}};
  // Inside one shard, across two, a group across all, the whole vector.
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{10, 60}, {200, 300}, {100, 900}, {0, kSize}};
  // Staging uncapped (one collective per range), and capped at 40 floats
  // (packed allgathers in rounds of 10 to 20 floats per piece).
  for (const int64_t cap : {int64_t{0}, int64_t{40}})
  for (const auto& nodes : layouts) {
    const std::string layout = absl::StrCat(absl::StrJoin(nodes, ""), cap > 0 ? " capped" : "");
    std::vector<std::vector<GatherRoute>> routes(nodes.size());
    const auto statuses = hier_testing::RunGroupRanks(
        nodes, /*node_groups=*/true,
        absl::StrCat("layer_gather_test_", getpid(), "_", absl::StrJoin(nodes, ""), cap),
        [&](int rank, CommGroups& g) -> absl::Status {
          const shard::ZeroShardMap map(kSize, g.world->world_size());
          LayerGather gather(g.world.get(), &g, map, ranges, cap);
          std::vector<float> params(kSize);
          for (const auto& [lo, hi] : ranges) {
            // This rank's own slice holds the values; everything else garbage.
            for (int64_t i = 0; i < kSize; ++i) params[i] = -1000.f - rank;
            const optim::ParamRange own = map.owned(rank);
            for (int64_t i = own.lo; i < own.hi; ++i) params[i] = Value(i);
            int64_t bytes = 0;
            routes[rank].push_back(gather.RouteFor(lo, hi));
            RETURN_IF_ERROR(gather.Run(params.data(), lo, hi, &bytes));
            for (int64_t i = lo; i < hi; ++i) {
              if (params[i] != Value(i)) {
                return absl::InternalError(absl::StrCat("[", lo, ", ", hi, ") by ",
                                                        GatherRouteName(gather.RouteFor(lo, hi)),
                                                        ": element ", i, " is ", params[i],
                                                        ", its owner holds ", Value(i)));
              }
            }
          }
          return absl::OkStatus();
        });
    for (size_t r = 0; r < statuses.size(); ++r) {
      EXPECT_TRUE(statuses[r].ok()) << layout << " rank " << r << ": " << statuses[r];
    }
    for (size_t r = 1; r < routes.size(); ++r) EXPECT_EQ(routes[r], routes[0]) << layout;
    const bool equal_nodes_of_several = absl::StartsWith(layout, "aabb") || absl::StartsWith(layout, "aaaa");
    for (size_t k = 0; k < routes[0].size(); ++k) {
      if (!equal_nodes_of_several) {
        EXPECT_NE(routes[0][k], GatherRoute::kBroadcast) << layout << " range " << k;
        EXPECT_NE(routes[0][k], GatherRoute::kTwoLevel) << layout << " range " << k;
      }
    }
    if (absl::StartsWith(layout, "aabb")) {
      // The whole vector: 2 B on a node link in two levels, 3 B by the ring.
      EXPECT_EQ(routes[0][3], GatherRoute::kTwoLevel) << "the whole vector at 2x2";
    }
    if (absl::StartsWith(layout, "aaaa")) {
      // One node: the world is shm, every piece where it lies.
      for (GatherRoute r : routes[0]) EXPECT_EQ(r, GatherRoute::kPieces) << "one node: shm";
    }
    if (absl::StartsWith(layout, "abcd")) {
      EXPECT_EQ(routes[0][0], GatherRoute::kAllReduce) << "a range inside one shard";
      EXPECT_EQ(routes[0][3], GatherRoute::kAllGather) << "the whole vector";
    }
  }
}

// zero1/zero2's rounds: two levels only where they put fewer bytes on a
// node's link than the ring, i.e. at equal nodes of several ranks.
TEST(RoundGatherRoute, TwoLevelsOnlyAtEqualNodesOfSeveralRanks) {
  EXPECT_EQ(RoundGatherRoute(4, 2, true), GatherRoute::kTwoLevel);   // 2x2: 2C vs 3C
  EXPECT_EQ(RoundGatherRoute(8, 4, true), GatherRoute::kTwoLevel);    // 4x2: 6C vs 7C
  EXPECT_EQ(RoundGatherRoute(4, 4, true), GatherRoute::kAllGather);   // 4x1: a tie, the ring
  EXPECT_EQ(RoundGatherRoute(3, 2, false), GatherRoute::kAllGather);  // 2+1
  EXPECT_EQ(RoundGatherRoute(4, 1, false), GatherRoute::kAllGather);  // one node
}

TEST(CheapestGatherRoute, FewestFloatsOnTheBusiestLinkTiesToAllGather) {
  EXPECT_EQ(CheapestGatherRoute({3, 2, 1}), GatherRoute::kBroadcast);
  EXPECT_EQ(CheapestGatherRoute({2, 2, 2}), GatherRoute::kAllGather);
  EXPECT_EQ(CheapestGatherRoute({-1, 2, 2}), GatherRoute::kAllReduce);
  EXPECT_EQ(CheapestGatherRoute({-1, -1, 5}), GatherRoute::kBroadcast);
  EXPECT_EQ(CheapestGatherRoute({9, -1, -1}), GatherRoute::kAllGather);
  EXPECT_EQ(CheapestGatherRoute({3, 2, 2, 1}), GatherRoute::kTwoLevel);
  EXPECT_EQ(CheapestGatherRoute({2, 2, 2, 2}), GatherRoute::kAllGather);
  EXPECT_EQ(CheapestGatherRoute({-1, 2, 2, 2}), GatherRoute::kTwoLevel);
}

}  // namespace
}  // namespace sync
}  // namespace tandem
