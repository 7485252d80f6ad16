// Test-only: running `tandem local` (usually on simulated nodes) from a
// cluster test and reading what the run left — the output, the committed
// parameters, the bytes each node's link carried. Shared by
// nodes_equivalence_test and shard_servers_test; every run trains
// mlp:784,32,10 for kSteps steps (CommonFlags) so their parameters compare.
#ifndef TANDEM_TESTS_CLUSTER_CLUSTER_RUN_H_
#define TANDEM_TESTS_CLUSTER_CLUSTER_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {
namespace cluster_testing {

constexpr int kSteps = 12;
constexpr int kPerWorkerBatch = 8;

// $TEST_TMPDIR/<name>.
std::string Tmp(const std::string& name);
std::string ReadAll(const std::string& path);

struct TandemResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};
// `tandem local --bin_dir=<runfiles> <args>`, up to 120 s; output in Tmp(name + ".out").
TandemResult Tandem(const std::string& name, std::vector<std::string> args);

// The newest checkpoint file under <run_dir>/checkpoints ("" when none).
std::string LastCheckpoint(const std::string& run_dir);
// The model, steps, lr and seed every cluster run shares.
std::vector<std::string> CommonFlags(const std::string& run_dir);
// Bytes per node from the run's "links: bytes sent to other nodes: node-1 B1,
// node-2 B2; total B" line; empty when the line is missing or malformed.
std::vector<int64_t> LinkBytes(const std::string& output, int nodes);
double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);
// The parameters rank 0 committed at the end of a run in `run_dir` (gtest
// failures when there are none or they are not of step kSteps).
std::vector<float> FinalParams(const std::string& run_dir);

}  // namespace cluster_testing
}  // namespace tandem

#endif  // TANDEM_TESTS_CLUSTER_CLUSTER_RUN_H_
