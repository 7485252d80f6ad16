// End to end through `tandem local --shard_servers S` (issue 12): worker
// processes train a small MLP for a fixed number of steps with `--sync ps`
// and `--sync hybrid` (and ps with apply=chunk) against separate shard-server
// processes, and end with
// the parameters `--sync allreduce` reaches on the same workers (compared
// element-wise through the checkpoint rank 0 commits at the end, <= 1e-5).
// Once on one host (2 workers, 2 servers) and once on simulated nodes
// (2 nodes x 2 workers, 2 servers each a node of its own, 1 Gbit/s links;
// skipped where no network namespace can be made), where the servers'
// links must carry the pulled parameters.
//
// The check can fail: a server that applied a step twice or missed a
// worker's push, a pull of the wrong step, a hybrid node that pushed a sum
// with the wrong weight each move the parameters by far more than 1e-5.
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
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


std::vector<float> Train(const std::string& name, const std::string& sync,
                       const std::vector<std::string>& layout, std::string* output = nullptr,
                       bool* skipped = nullptr) {
  const std::string dir = Tmp(name);
  std::vector<std::string> args = CommonFlags(dir);
  args.push_back(absl::StrCat("--batch_size=", kPerWorkerBatch));
  // "ps+chunk": ps with per-chunk application (--sync_opt apply=chunk).
  const bool per_chunk = sync == "ps+chunk";
  args.push_back("--sync=" + (per_chunk ? std::string("ps") : sync));
  for (const std::string& a : layout) args.push_back(a);
  if (sync != "allreduce") {  // several chunks per server
    args.push_back(per_chunk ? "--sync_opt=chunk_mb=0.02,apply=chunk" : "--sync_opt=chunk_mb=0.02");
  }
  TandemResult r = Tandem(name, args);
  if (output != nullptr) *output = r.output;
  if (r.exit_code != 0 && absl::StrContains(r.output, "cannot create a network namespace")) {
    if (skipped != nullptr) *skipped = true;
    return {};
  }
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return {};
  return FinalParams(dir);
}

std::string RunName(const std::string& sync) {
  return sync == "ps+chunk" ? "host-ps-chunk" : "host-" + sync;
}

TEST(ShardServersTest, PsAndHybridOnOneHostEndEqualToAllreduce) {
  const std::vector<std::string> layout = {"--workers=2", "--shard_servers=2"};
  const std::vector<float> reference = Train("host-allreduce", "allreduce", {"--workers=2"});
  ASSERT_FALSE(reference.empty());
  for (const std::string sync : {"ps", "hybrid", "ps+chunk"}) {
    SCOPED_TRACE(sync);
    std::string out;
    const std::vector<float> params =
        Train(RunName(sync), sync, layout, &out);
    EXPECT_TRUE(absl::StrContains(out, "shard servers: 127.0.0.1:")) << out;
    ASSERT_EQ(params.size(), reference.size());
    const double diff = MaxAbsDiff(params, reference);
    ::testing::Test::RecordProperty("max_abs_param_diff_" + sync, std::to_string(diff));
    EXPECT_LE(diff, 1e-5);
  }
}

TEST(ShardServersTest, HybridOnTwoNodesWithServersOfTheirOwn) {
  const std::vector<std::string> nodes = {"--nodes=2", "--workers_per_node=2", "--link=1gbit"};
  bool skipped = false;
  std::string out;
  std::vector<std::string> layout = nodes;
  layout.push_back("--shard_servers=2");
  const std::vector<float> params = Train("nodes-hybrid", "hybrid", layout, &out, &skipped);
  if (skipped) GTEST_SKIP() << out;
  ASSERT_FALSE(params.empty()) << out;
  // Servers at 127.0.1.3 and 127.0.1.4, after the two worker nodes.
  EXPECT_TRUE(absl::StrContains(out, "shard servers: 127.0.1.3:")) << out;
  // Each server sends every step's updated range (~12,700 floats, ~51 KB)
  // to one rank per node: well over 50 KB per step on its link.
  const size_t at = out.find("links: bytes sent to other nodes: ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  for (const char* server : {"shard-0 ", "shard-1 "}) {
    const size_t k = line.find(server);
    ASSERT_NE(k, std::string::npos) << line;
    std::string number = line.substr(k + std::strlen(server));
    number = number.substr(0, number.find_first_of(",;"));
    int64_t sent = 0;
    ASSERT_TRUE(absl::SimpleAtoi(number, &sent)) << line;
    EXPECT_GT(sent, int64_t{kSteps} * 50000) << line;
  }
  const std::vector<float> reference = Train("nodes-allreduce", "allreduce", nodes);
  ASSERT_EQ(params.size(), reference.size());
  EXPECT_LE(MaxAbsDiff(params, reference), 1e-5);
}

// One server for two nodes: the servers keep no replica anyway, so hybrid
// splits by default (ring_share=auto, f = 0.5 here, hybrid_split.h): half
// the vector is summed by a ring among the nodes and stepped on the
// workers, the rest goes through the server, and the job still ends equal
// to allreduce.
TEST(ShardServersTest, HybridWithOneServerForTwoNodesSplitsByDefault) {
  const std::vector<std::string> nodes = {"--nodes=2", "--workers_per_node=2", "--link=1gbit"};
  bool skipped = false;
  std::string out;
  std::vector<std::string> layout = nodes;
  layout.push_back("--shard_servers=1");
  const std::vector<float> params = Train("nodes-hybrid-one", "hybrid", layout, &out, &skipped);
  if (skipped) GTEST_SKIP() << out;
  ASSERT_FALSE(params.empty()) << out;
  const std::string log = ReadAll(Tmp("nodes-hybrid-one") + "/worker-0.log");
  EXPECT_TRUE(absl::StrContains(log, "ring_share=auto: f = 0.500 from 2 nodes and 1 shard servers"))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "the default where the shard servers keep no replicas"))
      << log;
  const std::vector<float> reference = Train("nodes-allreduce-one", "allreduce", nodes);
  ASSERT_EQ(params.size(), reference.size());
  EXPECT_LE(MaxAbsDiff(params, reference), 1e-5);
}

}  // namespace
}  // namespace tandem
