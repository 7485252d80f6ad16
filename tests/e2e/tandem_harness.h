// Test harness for end-to-end tests of the `tandem` binary: runs it as a
// child process (from the test's runfiles, services found with --bin_dir),
// hands each stdout line to a callback as it arrives, and returns the exit
// status, all of stdout, and stderr.
//
//   TandemRun r = RunTandem({"local", "--workers=2", ...},
//                           [&](const std::string& line) { ... });
//   EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
//
// Not thread-safe (one run per call). Failures to start are reported as
// exit_code -1 with the reason in stderr_text.
#ifndef TANDEM_TESTS_E2E_TANDEM_HARNESS_H_
#define TANDEM_TESTS_E2E_TANDEM_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/tandem/process.h"

namespace tandem {
namespace e2e {

struct TandemRun {
  int exit_code = -1;  // 128 + signal when killed
  std::string stdout_text;
  std::string stderr_text;
};

// $TEST_TMPDIR/<name> (or /tmp/<name>).
std::string TmpPath(const std::string& name);
std::string ReadFile(const std::string& path);
// The pid recorded in <run_dir>/<name>.pid, or -1.
int ReadPid(const std::string& run_dir, const std::string& name);
// The pid of the `tandem local` holding <run_dir> (its tandem.lock), or -1.
int ReadLockHolder(const std::string& run_dir);

// Runs `tandem <args> --bin_dir=<runfiles>`; calls on_line for each stdout line.
TandemRun RunTandem(const std::vector<std::string>& args,
                    const std::function<void(const std::string&)>& on_line = nullptr);

// The step of the checkpoint committed in `run_dir` (0: none yet).
int64_t CommittedStep(const std::string& run_dir);

// A RunTandem on_line callback: at the first progress line ("step ...")
// after a checkpoint is committed in `run_dir`, sends SIGINT (Ctrl-C) to the
// `tandem local` holding it, once, and sets *interrupted (left false if the
// holder could not be found or signalled). `interrupted` must outlive it.
std::function<void(const std::string&)> InterruptOnceCommitted(const std::string& run_dir,
                                                               bool* interrupted);

// Starts `tandem add-worker --run_dir=<run_dir>` in the background, its
// output to `log_path`.
absl::StatusOr<std::unique_ptr<cli::Subprocess>> StartAddWorker(const std::string& run_dir,
                                                                 const std::string& log_path);

}  // namespace e2e
}  // namespace tandem

#endif  // TANDEM_TESTS_E2E_TANDEM_HARNESS_H_
