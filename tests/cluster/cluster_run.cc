#include "tests/cluster/cluster_run.h"

#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/sharded_checkpoint.h"
#include "gtest/gtest.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace cluster_testing {

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

std::string LastCheckpoint(const std::string& run_dir) {
  const std::string dir = run_dir + "/checkpoints";
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      // Whole files and manifests (sharded: ZeRO's, or the shard servers'
      // for ps / hybrid), not the shard files a manifest names.
      const std::string name = e->d_name;
      if ((absl::EndsWith(name, ".tckpt") && !absl::StrContains(name, ".shard-")) ||
          absl::EndsWith(name, ".manifest")) {
        names.push_back(name);
      }
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

std::vector<float> FinalParams(const std::string& run_dir) {
  const std::string path = LastCheckpoint(run_dir);
  EXPECT_FALSE(path.empty()) << "no checkpoint in " << run_dir;
  if (path.empty()) return {};
  auto c = checkpoint::ReadWholeCheckpoint(path, {});
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  EXPECT_EQ(c->step, kSteps) << path;
  return c->params;
}


}  // namespace cluster_testing
}  // namespace tandem
