// Communicator groups, a thread per rank over one HashStore: node numbering,
// local ranks, group sizes and each group's AllReduce for nodes a,a,b,b and
// (unequal nodes) a,b,a,b,b; what "auto" resolves to; a forced shm across
// nodes and other bad options are clear errors, never hangs.
#include "common/comm/groups.h"

#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

// Unique per test and process: shm puts the prefix in its segment names.
std::string UniquePrefix() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat(info->test_suite_name(), "_", info->name());
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return absl::StrCat("groups_test_", getpid(), "/", name);
}

struct RankResult {
  absl::Status status;
  CommGroups groups;
  float world_sum = 0, intra_sum = 0, inter_sum = 0;
  int intra_rank = -1, intra_size = -1, inter_rank = -1, inter_size = -1;
  std::string intra_backend, inter_backend;
};

absl::Status SumOver(Communicator* c, float value, float* out) {
  if (c == nullptr) return absl::InternalError("group missing");
  float v = value;
  absl::Status s = c->AllReduce(&v, 1, ReduceOp::kSum);
  *out = v;
  return s;
}

// Every rank builds its groups and sums rank + 1 over each group.
std::vector<RankResult> RunGroups(const std::vector<std::string>& nodes,
                                  const std::string& transport, bool node_groups,
                                  const std::string& prefix) {
  gloo::rendezvous::HashStore store;
  const int world = static_cast<int>(nodes.size());
  std::vector<RankResult> results(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RankResult& out = results[r];
      GroupOptions o;
      o.base.rank = r;
      o.base.world_size = world;
      o.base.store = &store;
      o.base.prefix = prefix;
      o.base.timeout = absl::Seconds(30);
      o.base.shm_chunk_bytes = 64 << 10;
      o.node = nodes[r];
      o.transport = transport;
      o.node_groups = node_groups;
      absl::StatusOr<CommGroups> g = CreateCommGroups(o);
      if (!g.ok()) {
        out.status = g.status();
        return;
      }
      out.groups = std::move(*g);
      const float v = static_cast<float>(r + 1);
      out.status = SumOver(out.groups.world.get(), v, &out.world_sum);
      if (!out.status.ok() || !node_groups) return;
      out.intra_rank = out.groups.intra->rank();
      out.intra_size = out.groups.intra->world_size();
      out.intra_backend = out.groups.intra->backend();
      out.inter_rank = out.groups.inter->rank();
      out.inter_size = out.groups.inter->world_size();
      out.inter_backend = out.groups.inter->backend();
      out.status = SumOver(out.groups.intra.get(), v, &out.intra_sum);
      if (out.status.ok()) out.status = SumOver(out.groups.inter.get(), v, &out.inter_sum);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

// What one rank should see, written out by hand.
struct Want {
  int node_index, local_rank, local_size;
  int intra_rank, intra_size;
  float intra_sum;
  int inter_rank, inter_size;
  float inter_sum;
};

void ExpectRank(const RankResult& got, const Want& want, int rank) {
  SCOPED_TRACE(absl::StrCat("rank ", rank));
  ASSERT_TRUE(got.status.ok()) << got.status;
  EXPECT_EQ(got.groups.node_index, want.node_index);
  EXPECT_EQ(got.groups.local_rank, want.local_rank);
  EXPECT_EQ(got.groups.local_size, want.local_size);
  EXPECT_EQ(got.intra_rank, want.intra_rank);
  EXPECT_EQ(got.intra_size, want.intra_size);
  EXPECT_EQ(got.intra_sum, want.intra_sum);
  EXPECT_EQ(got.inter_rank, want.inter_rank);
  EXPECT_EQ(got.inter_size, want.inter_size);
  EXPECT_EQ(got.inter_sum, want.inter_sum);
}

TEST(CommGroups, TwoNodesOfTwo) {
  auto results = RunGroups({"a", "a", "b", "b"}, "auto", /*node_groups=*/true, UniquePrefix());
  ASSERT_EQ(results.size(), 4u);
  // intra a = {0,1}: 1+2; intra b = {2,3}: 3+4; inter0 = {0,2}: 1+3;
  // inter1 = {1,3}: 2+4.
  const Want want[] = {
      {0, 0, 2, 0, 2, 3, 0, 2, 4},
      {0, 1, 2, 1, 2, 3, 0, 2, 6},
      {1, 0, 2, 0, 2, 7, 1, 2, 4},
      {1, 1, 2, 1, 2, 7, 1, 2, 6},
  };
  for (int r = 0; r < 4; ++r) {
    ExpectRank(results[r], want[r], r);
    if (!results[r].status.ok()) continue;
    EXPECT_EQ(results[r].world_sum, 10.f);
    EXPECT_EQ(results[r].groups.num_nodes, 2);
    EXPECT_EQ(results[r].groups.node_of_rank, (std::vector<int>{0, 0, 1, 1}));
    EXPECT_EQ(results[r].groups.nodes, (std::vector<std::string>{"a", "b"}));
    // auto: the world spans nodes (gloo), intra is one node (shm), inter
    // spans nodes (gloo).
    EXPECT_EQ(results[r].groups.world_transport, "gloo");
    EXPECT_EQ(results[r].groups.world->backend(), "gloo");
    EXPECT_EQ(results[r].groups.intra_transport, "shm");
    EXPECT_EQ(results[r].intra_backend, "shm");
    EXPECT_EQ(results[r].groups.inter_transport, "gloo");
    EXPECT_EQ(results[r].inter_backend, "gloo");
  }
}

TEST(CommGroups, UnequalNodesInterleaved) {
  auto results = RunGroups({"a", "b", "a", "b", "b"}, "auto", /*node_groups=*/true, UniquePrefix());
  ASSERT_EQ(results.size(), 5u);
  // a = {0,2}, b = {1,3,4}. intra a: 1+3; intra b: 2+4+5. inter0 = {0,1}:
  // 1+2; inter1 = {2,3}: 3+4; inter2 = {4} alone: 5.
  const Want want[] = {
      {0, 0, 2, 0, 2, 4, 0, 2, 3},  {1, 0, 3, 0, 3, 11, 1, 2, 3}, {0, 1, 2, 1, 2, 4, 0, 2, 7},
      {1, 1, 3, 1, 3, 11, 1, 2, 7}, {1, 2, 3, 2, 3, 11, 0, 1, 5},
  };
  for (int r = 0; r < 5; ++r) {
    ExpectRank(results[r], want[r], r);
    if (!results[r].status.ok()) continue;
    EXPECT_EQ(results[r].world_sum, 15.f);
    EXPECT_EQ(results[r].groups.node_of_rank, (std::vector<int>{0, 1, 0, 1, 1}));
    EXPECT_EQ(results[r].groups.world_transport, "gloo");
    EXPECT_EQ(results[r].intra_backend, "shm");
  }
  // A group of one rank is on one node: auto gives it shm.
  EXPECT_EQ(results[0].inter_backend, "gloo");
  EXPECT_EQ(results[4].inter_backend, "shm");
}

TEST(CommGroups, ForcedGlooIsUsedForEveryGroup) {
  auto results = RunGroups({"a", "a", "b", "b"}, "gloo", /*node_groups=*/true, UniquePrefix());
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(results[r].status.ok()) << "rank " << r << ": " << results[r].status;
    EXPECT_EQ(results[r].groups.world->backend(), "gloo");
    EXPECT_EQ(results[r].intra_backend, "gloo");
    EXPECT_EQ(results[r].inter_backend, "gloo");
    EXPECT_EQ(results[r].world_sum, 10.f);
    EXPECT_EQ(results[r].intra_sum, r < 2 ? 3.f : 7.f);
  }
}

TEST(CommGroups, AutoOnOneNodeIsShmAndNoNodeGroupsUnlessAsked) {
  auto results = RunGroups({"h", "h", "h"}, "auto", /*node_groups=*/false, UniquePrefix());
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(results[r].status.ok()) << "rank " << r << ": " << results[r].status;
    const CommGroups& g = results[r].groups;
    EXPECT_EQ(g.world_transport, "shm");
    EXPECT_EQ(g.world->backend(), "shm");
    EXPECT_EQ(g.world->rank(), r);
    EXPECT_EQ(g.world->world_size(), 3);
    EXPECT_EQ(results[r].world_sum, 6.f);
    EXPECT_EQ(g.intra, nullptr);
    EXPECT_EQ(g.inter, nullptr);
    EXPECT_EQ(g.num_nodes, 1);
    EXPECT_EQ(g.local_rank, r);
    EXPECT_EQ(g.local_size, 3);
  }
}

TEST(CommGroups, ForcedShmAcrossNodesNamesTheNodes) {
  auto results =
      RunGroups({"host-a", "host-b", "host-a"}, "shm", /*node_groups=*/true, UniquePrefix());
  for (int r = 0; r < 3; ++r) {
    const absl::Status& s = results[r].status;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "rank " << r << ": " << s;
    EXPECT_NE(s.message().find("'host-a': ranks 0,2"), std::string::npos) << s;
    EXPECT_NE(s.message().find("'host-b': rank 1"), std::string::npos) << s;
    EXPECT_NE(s.message().find("use transport auto"), std::string::npos) << s;
  }
}

TEST(CommGroups, ASingleRankGetsWorldsOfOne) {
  auto results = RunGroups({"solo"}, "auto", /*node_groups=*/true, UniquePrefix());
  ASSERT_TRUE(results[0].status.ok()) << results[0].status;
  EXPECT_EQ(results[0].groups.world->world_size(), 1);
  EXPECT_EQ(results[0].intra_size, 1);
  EXPECT_EQ(results[0].inter_size, 1);
  EXPECT_EQ(results[0].world_sum, 1.f);
  EXPECT_EQ(results[0].inter_sum, 1.f);
}

TEST(CommGroups, BadOptionsFailAtOnce) {
  gloo::rendezvous::HashStore store;
  GroupOptions o;
  o.base.world_size = 2;  // rank 1 never comes: nothing here may wait for it
  o.base.store = &store;
  o.base.prefix = UniquePrefix();
  o.node = "";
  absl::Status s = CreateCommGroups(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("node id is empty"), std::string::npos) << s;

  o.node = "a";
  o.transport = "mpi";
  s = CreateCommGroups(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("transport 'mpi' is unknown"), std::string::npos) << s;

  o.transport = "nccl";  // this test does not link nccl_transport
  EXPECT_EQ(CreateCommGroups(o).status().code(), absl::StatusCode::kUnimplemented);

  o.transport = "auto";
  o.base.rank = 2;
  EXPECT_EQ(CreateCommGroups(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.base.rank = 0;
  o.base.store = nullptr;
  EXPECT_EQ(CreateCommGroups(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CommGroups, MissingPeerIsDeadlineExceeded) {
  gloo::rendezvous::HashStore store;
  GroupOptions o;
  o.base.world_size = 2;  // rank 1 never publishes its node
  o.base.store = &store;
  o.base.prefix = UniquePrefix();
  o.base.timeout = absl::Milliseconds(50);
  o.node = "a";
  absl::Status s = CreateCommGroups(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("/node/"), std::string::npos) << s;
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s;
}

}  // namespace
}  // namespace tandem
