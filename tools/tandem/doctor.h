// `tandem doctor`: reads a job's metrics (live /metrics scrapes, or the
// snapshots `tandem local` keeps in RUN_DIR/metrics/) and says where the
// step time goes and what to change, with the numbers behind each line:
// data-bound (data wait share, the data server's decode time per batch and
// queue depth), communication-bound (comm wait share, bytes per step, the
// rate achieved, bucket count), compute-bound (and a BLAS kernel weaker than
// the CPU supports), optimizer-heavy, a straggler rank (from the workers'
// compute, and the ranks the coordinator names: its tandem_straggler
// gauge), memory per worker.
//
//   std::vector<ProcessMetrics> job = ...;      // one per worker / data server
//   ASSIGN_OR_RETURN(Diagnosis d, Diagnose(job, DoctorOptions{}));
//   std::fputs(FormatDiagnosis(d).c_str(), stdout);
//
// Diagnose is pure (tests feed it metrics text). Failure: no worker among
// the inputs, or workers that have not finished a step yet, is
// FAILED_PRECONDITION saying what to wait for.
#ifndef TANDEM_TOOLS_TANDEM_DOCTOR_H_
#define TANDEM_TOOLS_TANDEM_DOCTOR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kernels/blas_core.h"
#include "common/metrics/prom_text.h"

namespace tandem {
namespace cli {

struct ProcessMetrics {
  std::string name;  // "worker-0", "dataserver", a URL ...
  std::vector<PromSample> samples;
};

struct DoctorOptions {
  // Each node's link when known (tandem local --link), for "% of the link".
  double link_bits_per_s = 0;
  // Without a link: the rate gradients move at between processes of one
  // host (shm or loopback TCP), bytes/s. Comm wait beyond twice what the
  // wire needs at this rate is counted as waiting for slower ranks.
  double local_bytes_per_s = 1e9;
  // The CPU the job ran on, for the BLAS kernel check (this machine's by
  // default: tandem local runs here).
  kernels::CpuFeatures cpu = kernels::DetectCpuFeatures();
  // OPENBLAS_CORETYPE as the job's environment set it ("" = unset): a value
  // set on purpose is reported, never silently second-guessed.
  std::string user_coretype;
  // Strategies the workers could switch to (registered names), for advice.
  std::vector<std::string> strategies;
  double memory_bytes_per_worker = 0;  // RAM a worker may use; 0 = unknown
  // The job already runs --sync_opt hier=1 (no advice to turn it on).
  bool hier = false;
};

struct Finding {
  std::string kind;      // "data", "communication", "compute", "optimizer", "straggler", "memory", "kernels"
  std::string evidence;  // the numbers
  std::string advice;    // flags to try; "" = nothing to change
};

struct Diagnosis {
  int workers = 0;
  double steps = 0;           // per worker (mean)
  double step_ms = 0;         // mean step time per worker
  // Mean shares of step time over workers.
  double forward = 0, backward = 0, comm_wait = 0, optimizer = 0, data_wait = 0;
  // The part of comm_wait the bytes explain (at the link or local rate);
  // the rest is ranks waiting for each other inside the collective.
  double comm_wire = 0;
  std::string verdict;  // "data-bound", "communication-bound", "compute-bound", "optimizer-bound"
  std::vector<Finding> findings;  // most important first
};

absl::StatusOr<Diagnosis> Diagnose(const std::vector<ProcessMetrics>& job,
                                   const DoctorOptions& options);

std::string FormatDiagnosis(const Diagnosis& d);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_DOCTOR_H_
