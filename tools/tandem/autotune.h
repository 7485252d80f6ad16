// `tandem local --autotune`: before the job, run it for a few steps under
// each of a few lossless sync configurations (bucket sizes, the flat and
// hierarchical ring, ZeRO-1/2), keep the fastest, print the table, and
// train with the winner.
//
//   ASSIGN_OR_RETURN(AutotuneResult r, RunAutotune(options, env));
//   RETURN_IF_ERROR(RunLocal(r.chosen, env));
//
// Each trial is a whole `tandem local` run (its own processes and run
// directory, <run_dir>/autotune-N or a fresh /tmp one) stopped after
// LocalOptions::autotune_steps steps; its step time is the mean of the
// workers' tandem_step_seconds over the trial (the first step's set-up is
// amortised over the rest), read from the metric snapshots the workers
// write at exit. Lossy codecs (`--sync compressed`) are never tried: they
// change the numbers, not just the speed (`tandem plan` ranks them).
//
// Not thread-safe (starts processes; call from the thread that owns them).
#ifndef TANDEM_TOOLS_TANDEM_AUTOTUNE_H_
#define TANDEM_TOOLS_TANDEM_AUTOTUNE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/tandem/doctor.h"
#include "tools/tandem/local_options.h"
#include "tools/tandem/local_run.h"

namespace tandem {
namespace cli {

struct AutotuneCandidate {
  std::string sync;      // a registered strategy
  std::string sync_opt;  // its options, k=v,...
  bool is_default = false;  // what the job runs without --autotune
};

struct AutotuneTrial {
  AutotuneCandidate candidate;
  double step_seconds = 0;  // mean over the trial's steps and workers
  double samples_per_second = 0;
  std::string error;  // why the trial failed ("" = it ran)
};

struct AutotuneResult {
  std::vector<AutotuneTrial> trials;
  int chosen = -1;    // index into trials
  LocalOptions chosen_options;
};

// The configurations tried for `o`: allreduce with 1, 4, 25 (the default)
// and 100 MiB buckets, allreduce hier=1 when there are several nodes of
// several workers, zero1 and zero2.
std::vector<AutotuneCandidate> AutotuneCandidates(const LocalOptions& o);

// Mean step time over every worker snapshot in `metrics` (tandem_step_seconds
// sum / count); NOT_FOUND when no snapshot has a step.
absl::StatusOr<double> MeanStepSeconds(const std::vector<ProcessMetrics>& metrics);

// The index of the fastest trial that ran; -1 when none did. Ties go to the
// earlier (the default comes first among equals).
int FastestTrial(const std::vector<AutotuneTrial>& trials);

// The table: one line per trial (strategy, options, ms per step, samples/s,
// ratio to the default), then the choice.
std::string FormatAutotune(const AutotuneResult& r);

// Runs every candidate (`o` checked by ValidateLocalOptions, which refuses
// --autotune with the flags it chooses) for o.autotune_steps steps and returns the table and
// `o` with the fastest one's --sync / --sync_opt. FAILED_PRECONDITION when
// no trial ran (each trial's error in the message); CANCELLED when
// env.stop_requested() became true.
absl::StatusOr<AutotuneResult> RunAutotune(const LocalOptions& o, const LocalEnv& env);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_AUTOTUNE_H_
