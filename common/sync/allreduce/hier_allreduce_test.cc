// HierAllreduce, a thread per rank over real CommGroups (shm inside a node,
// Gloo across): for nodes a,a,b,b / a,b,a,b (nodes interleaved in rank
// order) / a,a,a,b,b,b it sums exactly like a flat world allreduce on
// integer data, and within float rounding on random floats, for bucket
// sizes 0, 1, below L, not a multiple of L and large. Which layouts it
// refuses and why (nodes of different sizes, one node, one rank per node,
// unknown nodes), checked on hand-built groups.
#include "common/sync/allreduce/hier_allreduce.h"

#include <unistd.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/testing/rank_threads.h"
#include "common/status/status_macros.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

std::string UniquePrefix(const std::string& extra = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat(info->test_suite_name(), "_", info->name(), extra);
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return absl::StrCat("hier_allreduce_test_", getpid(), "/", name);
}

// Pretends to be a group of `size`; never communicates.
class SizedCommunicator final : public Communicator {
 public:
  explicit SizedCommunicator(int size, int rank = 0) : size_(size), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  std::string backend() const override { return "fake"; }
  absl::Status AllReduce(float*, int64_t, ReduceOp) override { return Unused(); }
  absl::Status ReduceScatter(const float*, float*, int64_t) override { return Unused(); }
  absl::Status AllGather(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Broadcast(void*, int64_t, int) override { return Unused(); }
  absl::Status AllToAll(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not used"); }
  int size_, rank_;
};

// Groups as CreateCommGroups would describe them for rank 0 of `node_of_rank`.
CommGroups FakeGroups(const std::vector<int>& node_of_rank, int intra_size, int inter_size) {
  CommGroups g;
  g.world = std::make_unique<SizedCommunicator>(static_cast<int>(node_of_rank.size()));
  g.intra = std::make_unique<SizedCommunicator>(intra_size);
  g.inter = std::make_unique<SizedCommunicator>(inter_size);
  g.node_of_rank = node_of_rank;
  int nodes = 0;
  for (int n : node_of_rank) nodes = std::max(nodes, n + 1);
  g.num_nodes = nodes;
  for (int n = 0; n < nodes; ++n) g.nodes.push_back(std::string(1, static_cast<char>('a' + n)));
  return g;
}

TEST(HierarchicalUnusableReason, EqualNodesOfSeveralRanksAreUsable) {
  EXPECT_EQ(HierarchicalUnusableReason(FakeGroups({0, 0, 1, 1}, 2, 2)), "");
  EXPECT_EQ(HierarchicalUnusableReason(FakeGroups({0, 1, 0, 1}, 2, 2)), "");
  EXPECT_EQ(HierarchicalUnusableReason(FakeGroups({0, 0, 0, 1, 1, 1}, 3, 2)), "");
}

TEST(HierarchicalUnusableReason, SaysWhyOtherLayoutsAreNot) {
  EXPECT_NE(HierarchicalUnusableReason(FakeGroups({0, 0, 1}, 2, 2))
                .find("nodes have different numbers of ranks ('a': 2, 'b': 1)"),
            std::string::npos);
  EXPECT_NE(HierarchicalUnusableReason(FakeGroups({0, 1, 0, 1, 1}, 2, 2))
                .find("('a': 2, 'b': 3)"),
            std::string::npos);
  EXPECT_NE(HierarchicalUnusableReason(FakeGroups({0, 0, 0}, 3, 1)).find("one node"),
            std::string::npos);
  EXPECT_NE(HierarchicalUnusableReason(FakeGroups({0, 1, 2}, 1, 3)).find("every node has one rank"),
            std::string::npos);
  EXPECT_NE(HierarchicalUnusableReason(FakeGroups({0, 0, 1, 1}, 4, 1)).find("do not match"),
            std::string::npos);

  CommGroups unknown = FakeGroups({0, 0, 1, 1}, 2, 2);
  unknown.node_of_rank.clear();
  EXPECT_NE(HierarchicalUnusableReason(unknown).find("node of every rank is not known"),
            std::string::npos);
  CommGroups flat_only = FakeGroups({0, 0, 1, 1}, 2, 2);
  flat_only.intra.reset();
  EXPECT_NE(HierarchicalUnusableReason(flat_only).find("node_groups = false"), std::string::npos);
}

TEST(HierAllreduce, CreateRefusesUnusableLayoutsAndBadOptions) {
  CommGroups uneven = FakeGroups({0, 0, 1}, 2, 2);
  HierAllreduceOptions o;
  o.groups = &uneven;
  o.max_count = 10;
  absl::StatusOr<std::unique_ptr<HierAllreduce>> h = HierAllreduce::Create(o);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("different numbers of ranks"), std::string::npos)
      << h.status();

  CommGroups even = FakeGroups({0, 0, 1, 1}, 2, 2);
  o.groups = &even;
  o.max_count = -1;
  EXPECT_EQ(HierAllreduce::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.groups = nullptr;
  o.max_count = 10;
  EXPECT_EQ(HierAllreduce::Create(o).status().code(), absl::StatusCode::kInvalidArgument);

  o.groups = &even;
  h = HierAllreduce::Create(o);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)->local_size(), 2);
  EXPECT_EQ((*h)->ShareCount(7), 4);
  EXPECT_EQ((*h)->ShareCount(8), 4);
  std::vector<float> big(12);
  absl::Status s = (*h)->Run(big.data(), 12);  // above max_count: refused before any collective
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_count"), std::string::npos) << s;
}

constexpr int64_t kCounts[] = {0, 1, 2, 3, 5, 7, 64, 1001};
constexpr int64_t kMaxCount = 1001;

// Every rank: for each count, the hierarchical sum and a flat world
// allreduce of the same data; integer data must match exactly, random data
// must be within float rounding of the double-precision sum.
absl::Status CompareWithFlat(int rank, CommGroups& g, int world) {
  HierAllreduceOptions o;
  o.groups = &g;
  o.max_count = kMaxCount;
  ASSIGN_OR_RETURN(std::unique_ptr<HierAllreduce> h, HierAllreduce::Create(o));
  for (int64_t count : kCounts) {
    std::vector<float> hier(count), flat(count);
    for (int64_t i = 0; i < count; ++i) hier[i] = flat[i] = comm_testing::ExactValue(rank, i);
    RETURN_IF_ERROR(h->Run(hier.data(), count));
    RETURN_IF_ERROR(g.world->AllReduce(flat.data(), count, ReduceOp::kSum));
    for (int64_t i = 0; i < count; ++i) {
      if (hier[i] != flat[i]) {
        return absl::InternalError(absl::StrCat("integer data, count ", count, ", element ", i,
                                                ": hierarchical ", hier[i], " flat ", flat[i]));
      }
    }
    // Random floats: every rank can compute every rank's data (seeded by
    // rank), hence the exact sum in double.
    std::vector<double> exact(count, 0.0), magnitude(count, 0.0);
    for (int r = 0; r < world; ++r) {
      std::mt19937 rng(1000 + r);
      std::normal_distribution<float> normal(0.f, 1.f);
      for (int64_t i = 0; i < count; ++i) {
        const float x = normal(rng);
        if (r == rank) hier[i] = x;
        exact[i] += x;
        magnitude[i] += std::fabs(x);
      }
    }
    RETURN_IF_ERROR(h->Run(hier.data(), count));
    for (int64_t i = 0; i < count; ++i) {
      if (std::fabs(hier[i] - exact[i]) > 1e-6 * magnitude[i]) {
        return absl::InternalError(absl::StrCat("random data, count ", count, ", element ", i,
                                                ": hierarchical ", hier[i], " exact ", exact[i]));
      }
    }
  }
  return absl::OkStatus();
}

class SumsLikeFlat : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(SumsLikeFlat, OnEveryRank) {
  const std::vector<std::string> nodes = GetParam();
  const int world = static_cast<int>(nodes.size());
  auto results = hier_testing::RunGroupRanks(
      nodes, /*node_groups=*/true, UniquePrefix(absl::StrCat("_", world)),
      [world](int rank, CommGroups& g) { return CompareWithFlat(rank, g, world); });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

INSTANTIATE_TEST_SUITE_P(Layouts, SumsLikeFlat,
                         ::testing::Values(std::vector<std::string>{"a", "a", "b", "b"},
                                           std::vector<std::string>{"a", "b", "a", "b"},
                                           std::vector<std::string>{"a", "a", "a", "b", "b", "b"}),
                         [](const ::testing::TestParamInfo<std::vector<std::string>>& info) {
                           std::string name;
                           for (const std::string& n : info.param) name += n;
                           return name;
                         });

// Real groups of nodes a,a,b: every rank refuses, none waits on a peer.
TEST(HierAllreduce, UnevenNodesAreRefusedOnEveryRank) {
  auto results = hier_testing::RunGroupRanks(
      {"a", "a", "b"}, /*node_groups=*/true, UniquePrefix(), [](int, CommGroups& g) {
        HierAllreduceOptions o;
        o.groups = &g;
        o.max_count = 8;
        return HierAllreduce::Create(o).status();
      });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kInvalidArgument) << "rank " << r;
    EXPECT_NE(results[r].message().find("('a': 2, 'b': 1)"), std::string::npos) << results[r];
  }
}

}  // namespace
}  // namespace sync
}  // namespace tandem
