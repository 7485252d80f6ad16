// End to end through `tandem local --nodes 2 --workers_per_node 2`: four
// worker processes on two simulated nodes (own addresses, node ids, a
// 1 Gbit/s htb link each) train a small MLP for a fixed number of steps and
// end with the parameters of `tandem local --workers 1` at 4x the per-worker
// batch, compared element-wise through the checkpoints rank 0 commits at the
// end; once with flat ring allreduce and once with --sync_opt hier=1. lr_scaling=none keeps the learning rate equal; the seed fixes both the
// initialisation and the data order.
//
// The check can fail: a rank that drew other samples, a reduction that
// summed instead of averaged, or a node group that synchronised only within
// a node each move the parameters by far more than 1e-5. The tc counters
// must also show both node links carrying the gradients.
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_run.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace {

using cluster_testing::CommonFlags;
using cluster_testing::FinalParams;
using cluster_testing::kPerWorkerBatch;
using cluster_testing::kSteps;
using cluster_testing::LinkBytes;
using cluster_testing::MaxAbsDiff;
using cluster_testing::ReadAll;
using cluster_testing::Tandem;
using cluster_testing::TandemResult;
using cluster_testing::Tmp;

// One process at 4x the per-worker batch, and 2 nodes x 2 workers with
// flat ring allreduce (hier=0) and hierarchical allreduce (hier=1): all
// three end within 1e-5; hier=1 sends fewer bytes across the node links.
TEST(NodesTest, TwoNodesOfTwoWorkersEndEqualToOneProcessAtFourTimesTheBatch) {
  std::vector<int64_t> flat_bytes;
  std::vector<float> reference;
  for (const std::string hier : {"0", "1"}) {
    SCOPED_TRACE("hier=" + hier);
    const std::string dir = Tmp("nodes-hier" + hier);
    std::vector<std::string> args = CommonFlags(dir);
    for (const char* a : {"--nodes=2", "--workers_per_node=2", "--link=1gbit"}) args.push_back(a);
    args.push_back(absl::StrCat("--batch_size=", kPerWorkerBatch));
    args.push_back("--sync_opt=hier=" + hier);
    TandemResult nodes = Tandem("nodes-hier" + hier, args);
    if (nodes.exit_code != 0 &&
        absl::StrContains(nodes.output, "cannot create a network namespace")) {
      GTEST_SKIP() << nodes.output;
    }
    ASSERT_EQ(nodes.exit_code, 0) << nodes.output;
    EXPECT_TRUE(absl::StrContains(nodes.output, "4 workers (2 nodes x 2)")) << nodes.output;
    EXPECT_TRUE(absl::StrContains(nodes.output, "metrics: worker-3 http://127.0.1.2:"))
        << nodes.output;
    // Both node links carried the gradients: flat ring moves 2 x 3/4 of the
    // ~25,450 floats (~150 KB) across each node boundary per step, hier=1
    // one node-to-node allreduce (~100 KB); well over 50 KB per step each.
    const std::vector<int64_t> sent = LinkBytes(nodes.output, 2);
    ASSERT_EQ(sent.size(), 2u) << nodes.output;
    for (int64_t b : sent) EXPECT_GT(b, int64_t{kSteps} * 50000) << nodes.output;
    if (hier == "0") {
      flat_bytes = sent;
    } else if (flat_bytes.size() == 2) {
      EXPECT_LT(sent[0] + sent[1], (flat_bytes[0] + flat_bytes[1]) * 4 / 5)
          << "hier=1 should send about 2/3 of what the flat ring sends across nodes";
    }
    std::vector<float> params = FinalParams(dir);
    ASSERT_GE(params.size(), size_t{784 * 32 + 32 + 32 * 10 + 10});  // padded per tensor
    if (reference.empty()) {
      const std::string one_dir = Tmp("one");
      std::vector<std::string> one_args = CommonFlags(one_dir);
      one_args.push_back("--workers=1");
      one_args.push_back(absl::StrCat("--batch_size=", 4 * kPerWorkerBatch));
      TandemResult one = Tandem("one", one_args);
      ASSERT_EQ(one.exit_code, 0) << one.output;
      reference = FinalParams(one_dir);
    }
    ASSERT_EQ(params.size(), reference.size());
    const double diff = MaxAbsDiff(params, reference);
    ::testing::Test::RecordProperty("max_abs_param_diff_hier" + hier, std::to_string(diff));
    EXPECT_LE(diff, 1e-5);
  }
}

}  // namespace
}  // namespace tandem
