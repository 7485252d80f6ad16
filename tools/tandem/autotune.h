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
// Trials that cannot change anything are not run: a bucket size that gives
// this model the same buckets as one already tried (a 0.8 MiB gradient is
// one bucket under 1, 4, 25 and 100 MiB). The trials' budget is bounded by
// kAutotuneJobFraction of the job's own steps: fewer steps per trial for a
// short job, and none (autotune skipped, the default trained) when that
// leaves under kMinAutotuneSteps per trial.
//
// Not thread-safe (starts processes; call from the thread that owns them).
#ifndef TANDEM_TOOLS_TANDEM_AUTOTUNE_H_
#define TANDEM_TOOLS_TANDEM_AUTOTUNE_H_

#include <cstdint>
#include <functional>
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
  // What was skipped and the budget (RunAutotune prints each at once).
  std::vector<std::string> notes;
};

constexpr double kAutotuneJobFraction = 0.1;
constexpr int kMinAutotuneSteps = 5;

// The configurations tried for `o`: allreduce with 1, 4, 25 (the default)
// and 100 MiB buckets, allreduce hier=1 when there are several nodes of
// several workers, zero1 and zero2. With `buckets` (the bucket count the
// model gets at a cap in MiB), an allreduce bucket size that gives as many
// buckets as an earlier candidate is left out and described in *skipped.
std::vector<AutotuneCandidate> AutotuneCandidates(
    const LocalOptions& o, const std::function<int(double cap_mb)>& buckets = nullptr,
    std::vector<std::string>* skipped = nullptr);

// Optimizer steps of the whole job: --max_steps, else epochs x the global
// batches in `train_samples`.
int64_t JobSteps(const LocalOptions& o, int64_t train_samples);

// Steps per trial: o.autotune_steps, lowered so that `trials` of them stay
// within kAutotuneJobFraction of `job_steps`; 0 when that leaves fewer than
// kMinAutotuneSteps (autotune is not worth its cost for this job).
int AutotuneStepsPerTrial(int requested, int64_t job_steps, int trials);

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
