#include "tools/tandem/autotune.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"
#include "common/nn/model_spec.h"
#include "common/plan/model_cost.h"
#include "common/plan/strategy_cost.h"
#include "common/data/dataset.h"
#include "tools/tandem/doctor_command.h"
#include "tools/tandem/model_check.h"

namespace tandem {
namespace cli {

std::vector<AutotuneCandidate> AutotuneCandidates(const LocalOptions& o,
                                                  const std::function<int(double)>& buckets,
                                                  std::vector<std::string>* skipped) {
  std::vector<AutotuneCandidate> c = {{"allreduce", "bucket_cap_mb=25", true}};
  std::vector<int> seen;
  if (buckets) seen.push_back(buckets(25));
  for (double cap : {1.0, 4.0, 100.0}) {
    const std::string opt = absl::StrCat("bucket_cap_mb=", cap);
    if (buckets) {
      const int n = buckets(cap);
      if (std::find(seen.begin(), seen.end(), n) != seen.end()) {
        if (skipped != nullptr) {
          skipped->push_back(absl::StrCat("allreduce ", opt, " (", n,
                                          " bucket(s), as a bucket size already tried)"));
        }
        continue;
      }
      seen.push_back(n);
    }
    c.push_back({"allreduce", opt});
  }
  if (o.nodes > 1 && o.workers_per_node > 1) c.push_back({"allreduce", "hier=1,bucket_cap_mb=25"});
  c.push_back({"zero1", ""});
  c.push_back({"zero2", "bucket_cap_mb=25"});
  return c;
}

int64_t JobSteps(const LocalOptions& o, int64_t train_samples) {
  if (o.max_steps > 0) return o.max_steps;
  const int64_t global =
      int64_t{o.batch_size} * std::max(1, o.workers) * std::max(1, o.accumulation);
  return global > 0 ? int64_t{o.epochs} * (train_samples / global) : 0;
}

int AutotuneStepsPerTrial(int requested, int64_t job_steps, int trials) {
  if (trials <= 0) return 0;
  const int64_t budget =
      static_cast<int64_t>(kAutotuneJobFraction * static_cast<double>(job_steps)) / trials;
  const int64_t steps = std::min<int64_t>(requested, budget);
  return steps < kMinAutotuneSteps ? 0 : static_cast<int>(steps);
}

absl::StatusOr<double> MeanStepSeconds(const std::vector<ProcessMetrics>& metrics) {
  double sum = 0, count = 0;
  for (const ProcessMetrics& p : metrics) {
    if (!absl::StartsWith(p.name, "worker-")) continue;
    sum += SumOf(p.samples, "tandem_step_seconds_sum");
    count += SumOf(p.samples, "tandem_step_seconds_count");
  }
  if (!(count > 0)) {
    return absl::NotFoundError("no worker snapshot recorded a step (tandem_step_seconds)");
  }
  return sum / count;
}

int FastestTrial(const std::vector<AutotuneTrial>& trials) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(trials.size()); ++i) {
    if (!trials[i].error.empty() || !(trials[i].step_seconds > 0)) continue;
    if (best < 0 || trials[i].step_seconds < trials[best].step_seconds) best = i;
  }
  return best;
}

namespace {

// What autotune needs to know of the job before it runs anything.
struct JobShape {
  std::function<int(double)> buckets;  // bucket count at a cap (MiB)
  int64_t job_steps = 0;
};

absl::StatusOr<JobShape> ShapeOf(const LocalOptions& o) {
  JobShape s;
  auto spec = nn::ParseModelSpec(o.model);
  if (!spec.ok()) return spec.status();
  ASSIGN_OR_RETURN(DatasetFiles data, ResolveDataset(o));
  // A torchscript: module's buckets come from its own layout.
  ASSIGN_OR_RETURN(plan::ModelCost cost, GradientCostOf(*spec, data.inputs));
  s.buckets = [cost](double cap_mb) {
    absl::StatusOr<int> n = plan::BucketCount(cost, cap_mb);
    return n.ok() ? *n : -1;
  };
  ASSIGN_OR_RETURN(std::unique_ptr<data::Dataset> train,
                   data::OpenDataset(data.train_name, data.train_path));
  s.job_steps = JobSteps(o, train->num_samples());
  return s;
}

std::string Describe(const AutotuneCandidate& c) {
  return c.sync_opt.empty() ? c.sync : absl::StrCat(c.sync, " ", c.sync_opt);
}

}  // namespace

std::string FormatAutotune(const AutotuneResult& r) {
  if (r.trials.empty()) return "";
  double base = 0;
  for (const AutotuneTrial& t : r.trials) {
    if (t.candidate.is_default && t.error.empty()) base = t.step_seconds;
  }
  std::string out = absl::StrFormat("autotune: %-38s %10s %11s %12s\n", "configuration",
                                    "ms/step", "samples/s", "vs default");
  for (int i = 0; i < static_cast<int>(r.trials.size()); ++i) {
    const AutotuneTrial& t = r.trials[i];
    const std::string name =
        absl::StrCat(Describe(t.candidate), t.candidate.is_default ? " (default)" : "");
    if (!t.error.empty()) {
      absl::StrAppendFormat(&out, "autotune: %-38s failed: %s\n", name, t.error);
      continue;
    }
    absl::StrAppendFormat(&out, "autotune: %-38s %10.2f %11.0f %11s%s\n", name,
                          t.step_seconds * 1e3, t.samples_per_second,
                          base > 0 ? absl::StrFormat("%.2fx", base / t.step_seconds) : "-",
                          i == r.chosen ? "  <- chosen" : "");
  }
  if (r.chosen >= 0) {
    absl::StrAppend(&out, "autotune: training with --sync ", r.trials[r.chosen].candidate.sync,
                    r.trials[r.chosen].candidate.sync_opt.empty()
                        ? std::string()
                        : " --sync_opt " + r.trials[r.chosen].candidate.sync_opt,
                    "\n");
  }
  return out;
}

namespace {

// Where the trials' run directories go: --run_dir, else a fresh /tmp one.
absl::StatusOr<std::string> TrialsDirectory(const LocalOptions& o) {
  std::string parent = o.run_dir;
  if (parent.empty()) {
    std::string tmpl = "/tmp/tandem-autotune-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError("cannot create a directory for the autotune trials in /tmp");
    }
    parent = tmpl;
  }
  RETURN_IF_ERROR(MakeDirectories(parent));
  return parent;
}

// The job's options for trial `i`: `c`'s strategy for `steps` steps, no
// doctor, no evaluation, no checkpoints, in its own run directory.
LocalOptions TrialOptions(const LocalOptions& o, const AutotuneCandidate& c, int steps,
                          const std::string& parent, size_t i) {
  LocalOptions t = o;
  t.autotune = false;
  t.doctor = false;
  t.evaluate = false;  // a trial is timed, not judged: no test pass at its end
  t.sync = c.sync;
  t.sync_opt = c.sync_opt;
  t.max_steps = steps;
  t.checkpoint_every = 0;
  t.run_dir = absl::StrCat(parent, "/autotune-", i);
  return t;
}

// Runs one trial and times its steps from the workers' metrics; a trial
// that fails is a trial with an error, not an error (CANCELLED only when
// the user interrupted).
absl::StatusOr<AutotuneTrial> RunTrial(const LocalOptions& o, const LocalOptions& t,
                                       const AutotuneCandidate& c, const LocalEnv& env) {
  // A trial always starts from step 0: an earlier --autotune in this run
  // directory (before an interrupt) left its trial's job state there.
  std::remove(absl::StrCat(t.run_dir, "/coordinator-state/coordinator_state.pb").c_str());
  AutotuneTrial trial;
  trial.candidate = c;
  // The trial's console goes to a file next to its run directory.
  const std::string console = t.run_dir + ".out";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(console.c_str(), "w"),
                                                      &std::fclose);
  if (out == nullptr) return absl::InternalError(absl::StrCat("cannot write ", console));
  LocalEnv trial_env = env;
  trial_env.out = out.get();
  absl::Status s = RunLocal(t, trial_env);
  if (env.stop_requested()) return absl::CancelledError("interrupted during autotune");
  if (!s.ok()) {
    trial.error = absl::StrCat(s.message(), " (see ", console, ")");
    return trial;
  }
  auto metrics = LoadRunMetrics(t.run_dir);
  auto step = metrics.ok() ? MeanStepSeconds(*metrics) : metrics.status();
  if (!step.ok()) {
    trial.error = std::string(step.status().message());
    return trial;
  }
  trial.step_seconds = *step;
  // A step consumes batch x micro-batches samples on every worker.
  const int micro = o.accumulation > 0 ? o.accumulation : 1;
  trial.samples_per_second = static_cast<double>(o.batch_size) * micro * o.workers / *step;
  return trial;
}

// r->chosen and the options it trains with; an error naming every trial's
// failure when none ran.
absl::Status ChooseFastest(AutotuneResult* r) {
  r->chosen = FastestTrial(r->trials);
  if (r->chosen < 0) {
    std::string why;
    for (const AutotuneTrial& t : r->trials) {
      absl::StrAppend(&why, "; ", Describe(t.candidate), ": ", t.error);
    }
    return absl::FailedPreconditionError(absl::StrCat("autotune: no trial ran", why));
  }
  r->chosen_options.sync = r->trials[r->chosen].candidate.sync;
  r->chosen_options.sync_opt = r->trials[r->chosen].candidate.sync_opt;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AutotuneResult> RunAutotune(const LocalOptions& o, const LocalEnv& env) {
  ASSIGN_OR_RETURN(const std::string parent, TrialsDirectory(o));
  AutotuneResult r;
  ASSIGN_OR_RETURN(const JobShape shape, ShapeOf(o));
  std::vector<std::string> skipped;
  const std::vector<AutotuneCandidate> candidates =
      AutotuneCandidates(o, shape.buckets, &skipped);
  // Printed as they are known (before the trials' minutes), kept for tests.
  auto note = [&](std::string line) {
    std::fprintf(env.out, "autotune: %s\n", line.c_str());
    std::fflush(env.out);
    r.notes.push_back(std::move(line));
  };
  for (const std::string& s : skipped) {
    note(absl::StrCat("skipped ", s, ": it cannot change the step for this model"));
  }
  const int steps = AutotuneStepsPerTrial(o.autotune_steps, shape.job_steps,
                                          static_cast<int>(candidates.size()));
  r.chosen_options = o;
  r.chosen_options.autotune = false;
  if (steps == 0) {
    note(absl::StrFormat(
        "skipped: the job's %d steps leave fewer than %d steps for each of %d trials within "
        "%.0f%% of the job; training with --sync %s",
        static_cast<long long>(shape.job_steps), kMinAutotuneSteps,
        static_cast<int>(candidates.size()), 100 * kAutotuneJobFraction, o.sync));
    return r;
  }
  note(absl::StrFormat(
      "%d configurations x %d steps = %d steps, %.0f%% of the job's %d (trials under "
      "%s/autotune-N)",
      static_cast<int>(candidates.size()), steps, steps * static_cast<int>(candidates.size()),
      100.0 * steps * candidates.size() / std::max<int64_t>(1, shape.job_steps),
      static_cast<long long>(shape.job_steps), parent));
  for (size_t i = 0; i < candidates.size(); ++i) {
    const LocalOptions t = TrialOptions(o, candidates[i], steps, parent, i);
    ASSIGN_OR_RETURN(AutotuneTrial trial, RunTrial(o, t, candidates[i], env));
    r.trials.push_back(std::move(trial));
  }
  RETURN_IF_ERROR(ChooseFastest(&r));
  return r;
}

}  // namespace cli
}  // namespace tandem
