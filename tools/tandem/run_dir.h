// What `tandem local --run_dir D` does with D before anything starts: one
// run at a time (RunDirLock), and what an earlier run left there
// (InspectRunDir): nothing, an interrupted run to resume from its last
// committed checkpoint, or a finished one.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<RunDirLock> lock, RunDirLock::Acquire(dir));
//   ASSIGN_OR_RETURN(PriorRun prior, InspectRunDir(dir, job_id));
//   if (prior.kind == PriorRun::kFinished) { print FinishedMessage(prior); return; }
//   if (prior.kind == PriorRun::kInterrupted) print ResumeMessage(prior);
//
// The lock is flock(2) on <D>/tandem.lock (the holder's pid written in it),
// taken without waiting and held until the RunDirLock is destroyed or the
// process exits however it exits (the kernel releases it: a crash leaves no
// stale lock). The file descriptor is close-on-exec, so children never hold
// it. Acquire fails with ALREADY_EXISTS naming the holder's pid, before
// anything in D is touched.
//
// Thread-compatible; RunDirLock is move-only in spirit (not copyable).
#ifndef TANDEM_TOOLS_TANDEM_RUN_DIR_H_
#define TANDEM_TOOLS_TANDEM_RUN_DIR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {
namespace cli {

class RunDirLock {
 public:
  // Creates `run_dir` if needed, then locks it.
  static absl::StatusOr<std::unique_ptr<RunDirLock>> Acquire(const std::string& run_dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  explicit RunDirLock(int fd) : fd_(fd) {}
  int fd_;
};

// <run_dir>/result: the final line a finished run leaves (its accuracy).
std::string ResultPath(const std::string& run_dir);

struct PriorRun {
  enum Kind { kNone, kInterrupted, kFinished };
  Kind kind = kNone;
  std::string run_dir;
  int64_t step = 0;              // the last committed checkpoint's (0: none)
  std::string checkpoint;        // its path
  int64_t epoch = 0;             // its data cursor (0-based epoch)
  int64_t samples_in_epoch = 0;
  std::string result;            // kFinished: the contents of ResultPath, trimmed
};

// Reads <run_dir>/coordinator-state. FAILED_PRECONDITION when it holds
// another job id than a non-empty `job_id` (saying which --job_id resumes
// it), DATA_LOSS when it is
// unreadable (saying to use another --run_dir).
absl::StatusOr<PriorRun> InspectRunDir(const std::string& run_dir, const std::string& job_id);

// "resuming from step 300 of the interrupted run in D (...)".
std::string ResumeMessage(const PriorRun& prior);
// What a finished run directory says instead of training again.
std::string FinishedMessage(const PriorRun& prior);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_RUN_DIR_H_
