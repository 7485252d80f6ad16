// Test-only: a small `tandem local` job (2 workers, mlp:784,64,10, 50
// samples per worker per step, one epoch cut short by --max_steps) whose
// workers log every sample they train on, and the check that what the
// final model trained on, over one or more runs of it, is each of
// steps x 100 samples exactly once, and the interrupt-and-resume of a run.
// Shared by resume_test, zero2_resume_test, hybrid_resume_test and
// stall_test.
#ifndef TANDEM_TESTS_E2E_SMALL_JOB_H_
#define TANDEM_TESTS_E2E_SMALL_JOB_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/tandem_harness.h"

namespace tandem {
namespace e2e {

constexpr int kSmallJobSamplesPerStep = 100;  // 2 workers x 50

// `tandem local` arguments for the job; sample logs go to `samples` (which
// must exist).
std::vector<std::string> SmallJobArgs(const std::string& run_dir, const std::string& samples,
                                      int steps, int checkpoint_every);

// SmallJobArgs with a checkpoint every 20 steps and at least 10 ms a batch
// (2 s for 200 steps): a Ctrl-C at the first progress line after a commit
// lands long before the last step, however fast this machine steps.
std::vector<std::string> InterruptibleJobArgs(const std::string& run_dir,
                                              const std::string& samples, int steps);

// Step -> the loss field of its progress line ("step 40/200 epoch 1 loss
// 0.5321 ..."), for every progress line in `out`.
std::map<int, std::string> LoggedLosses(const std::string& out);

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

// The user's Ctrl-C and resume, in run directory $TEST_TMPDIR/<name> with
// sample logs in <name>-samples-1 and -2: `args(run_dir, first_samples)`
// gets SIGINT at its first progress line after a checkpoint is committed,
// then `args(run_dir, second_samples)` (the same command) runs to the end.
// Adds gtest failures unless the first run was interrupted (exit 130) after
// a commit before step `steps`, the second finished (exit 0, "step
// steps/steps") saying it resumed from the committed step (tandem local's
// line and rank 0's), and the sample logs over both runs hold each of the
// job's samples once. `committed` is 0 when the first run failed those.
struct ResumedRun {
  std::string run_dir, first_samples, second_samples;
  TandemRun first, second;
  int64_t committed = 0;
};
ResumedRun InterruptAndResume(
    const std::string& name, int steps,
    const std::function<std::vector<std::string>(const std::string& run_dir,
                                                 const std::string& samples)>& args);

}  // namespace e2e
}  // namespace tandem

#endif  // TANDEM_TESTS_E2E_SMALL_JOB_H_
