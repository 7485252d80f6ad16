// AllreduceSync with hierarchical = true over real CommGroups, a thread per
// rank: the summed gradients and the update equal the flat ring's (exactly,
// on integer gradients) for 2 nodes x 2 ranks with buckets that do not split
// evenly; the inter-node bytes are ceil(n / L) per bucket instead of n; nodes
// of 2 and 1 ranks fall back to the flat ring (same result, flat's bytes);
// one node is flat with no inter-node bytes. Bad options are clear errors.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/comm/testing/rank_threads.h"
#include "common/optim/sgd.h"
#include "common/status/status_macros.h"
#include "common/sync/allreduce/allreduce_sync.h"
#include "common/sync/testing/hier_test_ranks.h"
#include "gtest/gtest.h"

namespace tandem {
namespace sync {
namespace {

std::string UniquePrefix(const std::string& extra) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat("hier_allreduce_sync_test_", getpid(), "/", info->name(), extra);
}

// Backward order; with a cap of ~26 floats the buckets are [27, 40) (13),
// [10, 27) (17) and [0, 10) (10): two of them odd, so padded for L = 2.
const std::vector<std::pair<int64_t, int64_t>> kRanges = {{27, 40}, {10, 27}, {0, 10}};
constexpr int64_t kSize = 40;
constexpr double kCapMb = 0.0001;
constexpr int kSteps = 2;
// Bytes one step's buckets hand across nodes: flat n each, hier ceil(n / 2).
constexpr int64_t kFlatInterBytes = (13 + 17 + 10) * 4;
constexpr int64_t kHierInterBytes = (7 + 9 + 5) * 4;

struct RankOut {
  std::vector<float> params;
  std::vector<float> grads;  // the last step's summed gradients
  SyncStats stats;
};

absl::Status TrainRank(int rank, CommGroups& g, bool hierarchical, RankOut* out) {
  std::vector<float> params(kSize, 0.f), grads(kSize, 0.f);
  AllreduceSyncOptions o;
  o.comm = g.world.get();
  o.groups = &g;
  o.hierarchical = hierarchical;
  o.params = params.data();
  o.grads = grads.data();
  o.size = kSize;
  o.ready_ranges = kRanges;
  o.bucket_cap_mb = kCapMb;
  ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, kSize}, optim::SgdOptions()));
  ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateAllreduceSync(std::move(o)));
  for (int step = 1; step <= kSteps; ++step) {
    for (int64_t i = 0; i < kSize; ++i) {
      grads[i] = comm_testing::ExactValue(rank + step, i);
    }
    RETURN_IF_ERROR(sync->BeginStep({}));
    for (const auto& [lo, hi] : kRanges) sync->OnGradientsReady(lo, hi);
    optim::StepContext ctx;
    ctx.step = step;
    ctx.lr = 0.5f;
    RETURN_IF_ERROR(sync->FinishStep(ctx));
  }
  out->params = params;
  out->grads = grads;
  out->stats = sync->stats();
  return absl::OkStatus();
}

std::vector<RankOut> RunSteps(const std::vector<std::string>& nodes, bool hierarchical,
                         const std::string& prefix) {
  std::vector<RankOut> out(nodes.size());
  auto results = hier_testing::RunGroupRanks(
      nodes, /*node_groups=*/true, prefix, [&](int rank, CommGroups& g) {
        return TrainRank(rank, g, hierarchical, &out[rank]);
      });
  for (size_t r = 0; r < nodes.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  }
  return out;
}

// The summed gradients of the last step, written out: sum over ranks of
// ExactValue(rank + kSteps, i).
std::vector<float> ExpectedSums(int world) {
  std::vector<float> sums(kSize, 0.f);
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < kSize; ++i) sums[i] += comm_testing::ExactValue(r + kSteps, i);
  }
  return sums;
}

TEST(HierAllreduceSync, TwoNodesOfTwoMatchFlatWithHalfTheInterNodeBytes) {
  const std::vector<std::string> nodes = {"a", "a", "b", "b"};
  const std::vector<RankOut> hier = RunSteps(nodes, true, UniquePrefix("_hier"));
  const std::vector<RankOut> flat = RunSteps(nodes, false, UniquePrefix("_flat"));
  ASSERT_EQ(hier.size(), 4u);
  const std::vector<float> sums = ExpectedSums(4);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_EQ(hier[r].params.size(), static_cast<size_t>(kSize));
    ASSERT_EQ(flat[r].params.size(), static_cast<size_t>(kSize));
    EXPECT_EQ(hier[r].grads, sums);
    EXPECT_EQ(flat[r].grads, sums);
    EXPECT_EQ(hier[r].params, flat[r].params);  // integer sums: no rounding difference
    EXPECT_NE(hier[r].params[0], 0.f);
    EXPECT_EQ(hier[r].stats.steps, kSteps);
    EXPECT_EQ(hier[r].stats.buckets, 3 * kSteps);
    EXPECT_EQ(flat[r].stats.inter_node_bytes, kSteps * kFlatInterBytes);
    EXPECT_EQ(hier[r].stats.inter_node_bytes, kSteps * kHierInterBytes);
    EXPECT_EQ(flat[r].stats.bytes_sent, kSteps * kSize * 4);
    // Reduce-scatter of the padded bucket (L * share) plus the share twice.
    EXPECT_EQ(hier[r].stats.bytes_sent, kSteps * 4 * kHierInterBytes);
  }
}

TEST(HierAllreduceSync, NodesOfDifferentSizesFallBackToTheFlatRing) {
  const std::vector<std::string> nodes = {"a", "a", "b"};
  const std::vector<RankOut> hier = RunSteps(nodes, true, UniquePrefix("_hier"));
  const std::vector<float> sums = ExpectedSums(3);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(hier[r].grads, sums);
    EXPECT_EQ(hier[r].stats.steps, kSteps);
    // The flat ring's accounting: every bucket whole, over a world that
    // spans nodes.
    EXPECT_EQ(hier[r].stats.bytes_sent, kSteps * kFlatInterBytes);
    EXPECT_EQ(hier[r].stats.inter_node_bytes, kSteps * kFlatInterBytes);
  }
}

TEST(HierAllreduceSync, OneNodeIsFlatWithNoInterNodeBytes) {
  const std::vector<RankOut> hier = RunSteps({"a", "a"}, true, UniquePrefix("_hier"));
  const std::vector<float> sums = ExpectedSums(2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(hier[r].grads, sums);
    EXPECT_EQ(hier[r].stats.bytes_sent, kSteps * kFlatInterBytes);
    EXPECT_EQ(hier[r].stats.inter_node_bytes, 0);
  }
}

// A communicator that is never called: option checks happen first.
class IdleCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend() const override { return "idle"; }
  absl::Status AllReduce(float*, int64_t, ReduceOp) override { return Unused(); }
  absl::Status ReduceScatter(const float*, float*, int64_t) override { return Unused(); }
  absl::Status AllGather(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Broadcast(void*, int64_t, int) override { return Unused(); }
  absl::Status AllToAll(const void*, void*, int64_t) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not used"); }
};

TEST(HierAllreduceSync, BadOptionsAreClearErrors) {
  std::vector<float> params(kSize), grads(kSize);
  CommGroups groups;
  groups.world = std::make_unique<IdleCommunicator>();
  IdleCommunicator other;
  auto options = [&](Communicator* comm, const CommGroups* g, bool hierarchical) {
    AllreduceSyncOptions o;
    o.comm = comm;
    o.groups = g;
    o.hierarchical = hierarchical;
    o.params = params.data();
    o.grads = grads.data();
    o.size = kSize;
    o.ready_ranges = kRanges;
    o.optimizer = *optim::Sgd::Create({0, kSize}, optim::SgdOptions());
    return o;
  };
  absl::StatusOr<std::unique_ptr<GradientSync>> s =
      CreateAllreduceSync(options(&other, nullptr, true));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("intra-node and inter-node"), std::string::npos)
      << s.status();
  s = CreateAllreduceSync(options(groups.world.get(), &groups, true));  // no intra / inter
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("node_groups = true"), std::string::npos) << s.status();
  s = CreateAllreduceSync(options(&other, &groups, false));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("groups->world must be"), std::string::npos) << s.status();
  s = CreateAllreduceSync(options(groups.world.get(), &groups, false));
  EXPECT_TRUE(s.ok()) << s.status();
}

}  // namespace
}  // namespace sync
}  // namespace tandem
