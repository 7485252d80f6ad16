// PieceBroadcast over real node groups (shm inside a node, Gloo across):
// after every owner's pieces of [0, n) are sent, every rank holds every
// owner's values, whether the layout allows two levels (2x2, interleaved
// 2x2) or falls back to the flat world broadcast (nodes of unequal size,
// no node groups); a sub-range moves only that range.
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/shard/zero_shard_map.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "common/sync/zero/zero_parts.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

float Value(int64_t i) { return 0.5f + static_cast<float>(i); }

struct Layout {
  std::vector<std::string> nodes;
  bool node_groups;
  bool two_level;  // expected
};

class PieceBroadcastTest : public ::testing::TestWithParam<Layout> {};

TEST_P(PieceBroadcastTest, EveryRankEndsWithEveryOwnersValues) {
  const Layout l = GetParam();
  constexpr int64_t kSize = 1003;  // no multiple of 3 or 4: padded shards
  static int run = 0;
  const std::string prefix = absl::StrCat("pb", ++run, "_", getpid());
  auto results = hier_testing::RunGroupRanks(
      l.nodes, l.node_groups, prefix, [&](int rank, CommGroups& g) -> absl::Status {
        const shard::ZeroShardMap map(kSize, g.world->world_size());
        std::vector<float> params(kSize, std::numeric_limits<float>::quiet_NaN());
        const optim::ParamRange mine = map.owned(rank);
        for (int64_t i = mine.lo; i < mine.hi; ++i) params[i] = Value(i);
        PieceBroadcast b(g.world.get(), l.node_groups ? &g : nullptr);
        if (b.two_level() != l.two_level) {
          return absl::InternalError(absl::StrCat("two_level ", b.two_level()));
        }
        // A range inside one layer first: only it arrives.
        int64_t bytes = 0;
        if (absl::Status s = b.Run(map, params.data(), 100, 700, &bytes); !s.ok()) return s;
        for (int64_t i = 0; i < kSize; ++i) {
          const bool want = (i >= 100 && i < 700) || (i >= mine.lo && i < mine.hi);
          if (want != !std::isnan(params[i]) || (want && params[i] != Value(i))) {
            return absl::InternalError(absl::StrCat("after [100, 700): element ", i, " = ",
                                                    params[i]));
          }
        }
        const int64_t after_part = bytes;
        if (absl::Status s = b.Run(map, params.data(), 0, kSize, &bytes); !s.ok()) return s;
        for (int64_t i = 0; i < kSize; ++i) {
          if (params[i] != Value(i)) {
            return absl::InternalError(absl::StrCat("element ", i, " = ", params[i]));
          }
        }
        // As an owner this rank sent its whole piece of [0, n) once more.
        if (bytes - after_part != mine.size() * int64_t{sizeof(float)}) {
          return absl::InternalError(absl::StrCat("bytes ", bytes - after_part));
        }
        return absl::OkStatus();
      });
  for (size_t r = 0; r < results.size(); ++r) EXPECT_TRUE(results[r].ok()) << r << ": " << results[r];
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PieceBroadcastTest,
    ::testing::Values(Layout{{"a", "a", "b", "b"}, true, true},
                      Layout{{"a", "b", "a", "b"}, true, true},
                      Layout{{"a", "a", "a", "b", "b", "b"}, true, true},
                      Layout{{"a", "a", "b"}, true, false},
                      Layout{{"a", "a", "b", "b"}, false, false},
                      Layout{{"a", "a"}, true, false}));

}  // namespace
}  // namespace sync
}  // namespace tandem
