// Test-only: a small `tandem local` job (2 workers, mlp:784,64,10, 50
// samples per worker per step, one epoch cut short by --max_steps) whose
// workers log every sample they train on, and the check that what the
// final model trained on, over one or more runs of it, is each of
// steps x 100 samples exactly once. Shared by resume_test and stall_test.
#ifndef TANDEM_TESTS_E2E_SMALL_JOB_H_
#define TANDEM_TESTS_E2E_SMALL_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {
namespace e2e {

constexpr int kSmallJobSamplesPerStep = 100;  // 2 workers x 50

// `tandem local` arguments for the job; sample logs go to `samples` (which
// must exist).
std::vector<std::string> SmallJobArgs(const std::string& run_dir, const std::string& samples,
                                      int steps, int checkpoint_every);

// Creates $TEST_TMPDIR/<name> (a gtest failure if it exists) and returns it.
std::string MakeTmpDir(const std::string& name);

// What the sample logs in `dirs` (worker-0 and worker-1 in each) say the
// final model trained on: distinct samples and repeats (rolled-back steps
// not counted). gtest failures for unreadable logs or more than one epoch.
struct SampleCoverage {
  int64_t distinct = 0;
  int64_t repeated = 0;
};
SampleCoverage CountSamples(const std::vector<std::string>& dirs);

}  // namespace e2e
}  // namespace tandem

#endif  // TANDEM_TESTS_E2E_SMALL_JOB_H_
