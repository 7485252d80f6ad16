// `tandem add-worker`: one more worker for a running `tandem local` job
// (elastic scale-up). `tandem local --max_workers M` (M > --workers) writes,
// for each index i in [--workers, M), a *slot* <run_dir>/worker-<i>.slot: the
// exact environment and command line worker i would get (coordinator and
// data-server addresses, model, token file, every --worker_arg). add-worker
// claims the lowest free slot, starts that worker (its stderr and stdout in
// <run_dir>/worker-<i>.log, its pid in worker-<i>.pid, which `tandem local`
// waits on before it stops the services), waits for it and exits with its
// status. The coordinator admits it at once and ends the running generation
// at the next step boundary; the next one has the larger world (LR rescaled,
// the data cursor continued at the exact sample; services/worker).
//
//   WriteWorkerSlot(run_dir, 2, env, argv);               // tandem local
//   ASSIGN_OR_RETURN(WorkerSlot s, ClaimWorkerSlot(run_dir));  // add-worker
//   absl::Status done = RunAddWorker({run_dir}, stdout, stop);
//
// Thread-compatible. Errors say what to fix: no slot files (the run was not
// started with --max_workers above --workers), every slot taken (all
// max_workers are running), a missing run directory, a worker that failed
// (its exit and last log lines).
#ifndef TANDEM_TOOLS_TANDEM_ADD_WORKER_H_
#define TANDEM_TOOLS_TANDEM_ADD_WORKER_H_

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {
namespace cli {

struct AddWorkerOptions {
  std::string run_dir;                               // a tandem local run directory; required
  absl::Duration grace = absl::Seconds(5);           // SIGTERM -> SIGKILL on interrupt
};

struct WorkerSlot {
  int index = -1;                 // worker-<index>
  std::vector<std::string> env;   // NAME=value
  std::vector<std::string> argv;  // argv[0] is the worker binary
};

// <run_dir>/worker-<index>.slot: one "env NAME=value" or "arg VALUE" per line.
absl::Status WriteWorkerSlot(const std::string& run_dir, int index,
                             const std::vector<std::string>& env,
                             const std::vector<std::string>& argv);

// Claims the lowest slot nobody claimed yet (an O_EXCL worker-<i>.claim).
absl::StatusOr<WorkerSlot> ClaimWorkerSlot(const std::string& run_dir);

// The pids recorded for workers started by add-worker in `run_dir` that are
// still running (for tandem local's supervision).
std::vector<int> RunningAddedWorkers(const std::string& run_dir, int first_index, int end_index);

// Workers add-worker started in `run_dir` (claimed slots in [first_index,
// end_index)) that have exited, and how many of them cleanly (from the
// worker-<i>.exit file RunAddWorker writes), for tandem local's summary.
struct AddedWorkers {
  int started = 0;
  int exited = 0;  // with an exit file
  int clean = 0;
};
AddedWorkers CountAddedWorkers(const std::string& run_dir, int first_index, int end_index);

absl::Status RunAddWorker(const AddWorkerOptions& options, std::FILE* out,
                          const std::function<bool()>& stop_requested);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_ADD_WORKER_H_
