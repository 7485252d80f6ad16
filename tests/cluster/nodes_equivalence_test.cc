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

// Bytes per node from the run's "links: bytes sent to other nodes: node-1 B1,
// node-2 B2; total B" line; empty when the line is missing or malformed.
std::vector<int64_t> LinkBytes(const std::string& output, int nodes) {
  const size_t at = output.find("links: bytes sent to other nodes: ");
  if (at == std::string::npos) return {};
  const std::string line = output.substr(at, output.find('\n', at) - at);
  std::vector<int64_t> sent;
  for (int n = 1; n <= nodes; ++n) {
    const std::string key = absl::StrCat("node-", n, " ");
    const size_t k = line.find(key);
    if (k == std::string::npos) return {};
    std::string number = line.substr(k + key.size());
    number = number.substr(0, number.find_first_of(",;"));
    int64_t v = 0;
    if (!absl::SimpleAtoi(number, &v)) return {};
    sent.push_back(v);
  }
  return sent;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  }
  return d;
}

// The parameters rank 0 committed at the end of a run in `run_dir`.
std::vector<float> FinalParams(const std::string& run_dir) {
  const std::string path = LastCheckpoint(run_dir);
  EXPECT_FALSE(path.empty()) << "no checkpoint in " << run_dir;
  if (path.empty()) return {};
  auto c = checkpoint::ReadCheckpoint(path, {});
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  EXPECT_EQ(c->step, kSteps) << path;
  return c->params;
}

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
