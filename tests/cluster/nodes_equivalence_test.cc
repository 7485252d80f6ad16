// End to end through `tandem local --nodes 2 --workers_per_node 2`: four
// worker processes on two simulated nodes (own addresses, node ids, a
// 1 Gbit/s htb link each) train a small MLP for a fixed number of steps and
// end with the parameters of `tandem local --workers 1` at 4x the per-worker
// batch, compared element-wise through the checkpoints rank 0 commits at the
// end. lr_scaling=none keeps the learning rate equal; the seed fixes both the
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
#include "tools/tandem/process.h"

namespace tandem {
namespace {

constexpr int kSteps = 12;
constexpr int kPerWorkerBatch = 8;

std::string Tmp(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TandemResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

TandemResult Tandem(const std::string& name, std::vector<std::string> args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string root = std::string(srcdir ? srcdir : ".") + "/tandem";
  cli::SubprocessOptions o;
  o.name = name;
  o.argv = {root + "/tools/tandem/tandem", "local", "--bin_dir=" + root};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.log_path = Tmp(name + ".out");
  TandemResult r;
  auto p = cli::Subprocess::Start(o);
  if (!p.ok()) {
    r.output = std::string(p.status().message());
    return r;
  }
  (*p)->WaitFor(absl::Seconds(120));
  (*p)->Stop(absl::Seconds(5));
  r.exit_code = (*p)->succeeded() ? 0 : ((*p)->exit_code() >= 0 ? (*p)->exit_code() : 128);
  r.output = ReadAll(o.log_path);
  return r;
}

// The newest checkpoint file under <run_dir>/checkpoints.
std::string LastCheckpoint(const std::string& run_dir) {
  const std::string dir = run_dir + "/checkpoints";
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (absl::EndsWith(e->d_name, ".tckpt")) names.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names.empty() ? std::string() : dir + "/" + names.back();
}

std::vector<std::string> CommonFlags(const std::string& run_dir) {
  return {"--model=mlp:784,32,10", "--epochs=1", absl::StrCat("--max_steps=", kSteps),
          "--lr=0.05", "--lr_scaling=none", "--seed=3", "--checkpoint_every=0",
          "--log_every=4", "--run_dir=" + run_dir};
}

TEST(NodesTest, TwoNodesOfTwoWorkersEndEqualToOneProcessAtFourTimesTheBatch) {
  const std::string nodes_dir = Tmp("nodes");
  std::vector<std::string> nodes_args = CommonFlags(nodes_dir);
  for (const char* a : {"--nodes=2", "--workers_per_node=2", "--link=1gbit"}) {
    nodes_args.push_back(a);
  }
  nodes_args.push_back(absl::StrCat("--batch_size=", kPerWorkerBatch));
  TandemResult nodes = Tandem("nodes", nodes_args);
  if (nodes.exit_code != 0 && absl::StrContains(nodes.output, "cannot create a network namespace")) {
    GTEST_SKIP() << nodes.output;
  }
  ASSERT_EQ(nodes.exit_code, 0) << nodes.output;
  EXPECT_TRUE(absl::StrContains(nodes.output, "4 workers (2 nodes x 2)")) << nodes.output;
  EXPECT_TRUE(absl::StrContains(nodes.output, "metrics: worker-3 http://127.0.1.2:"))
      << nodes.output;
  // Both node links carried traffic: per step, a ring allreduce moves about
  // 2 x 3/4 of the 25,450 floats across each of its two node boundaries.
  const size_t at = nodes.output.find("links: bytes sent to other nodes: ");
  ASSERT_NE(at, std::string::npos) << nodes.output;
  std::string line = nodes.output.substr(at, nodes.output.find('\n', at) - at);
  int64_t sent[2] = {-1, -1};
  for (int n = 0; n < 2; ++n) {
    const std::string key = absl::StrCat("node-", n + 1, " ");
    const size_t k = line.find(key);
    ASSERT_NE(k, std::string::npos) << line;
    std::string number = line.substr(k + key.size());
    number = number.substr(0, number.find_first_of(",;"));
    ASSERT_TRUE(absl::SimpleAtoi(number, &sent[n])) << line;
    EXPECT_GT(sent[n], int64_t{kSteps} * 100000) << line;  // >= ~100 KB per step
  }

  const std::string one_dir = Tmp("one");
  std::vector<std::string> one_args = CommonFlags(one_dir);
  one_args.push_back("--workers=1");
  one_args.push_back(absl::StrCat("--batch_size=", 4 * kPerWorkerBatch));
  TandemResult one = Tandem("one", one_args);
  ASSERT_EQ(one.exit_code, 0) << one.output;

  const std::string a_path = LastCheckpoint(nodes_dir);
  const std::string b_path = LastCheckpoint(one_dir);
  ASSERT_FALSE(a_path.empty()) << "no checkpoint in " << nodes_dir;
  ASSERT_FALSE(b_path.empty()) << "no checkpoint in " << one_dir;
  auto a = checkpoint::ReadCheckpoint(a_path, {});
  auto b = checkpoint::ReadCheckpoint(b_path, {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->step, kSteps);
  EXPECT_EQ(b->step, kSteps);
  ASSERT_EQ(a->params.size(), b->params.size());
  // The MLP's 25,450 parameters (the flat buffer pads each tensor a little).
  ASSERT_GE(a->params.size(), size_t{784 * 32 + 32 + 32 * 10 + 10});
  double max_diff = 0;
  for (size_t i = 0; i < a->params.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(a->params[i]) - double(b->params[i])));
  }
  ::testing::Test::RecordProperty("max_abs_param_diff", std::to_string(max_diff));
  EXPECT_LE(max_diff, 1e-5);
}

}  // namespace
}  // namespace tandem
