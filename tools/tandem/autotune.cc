#include "tools/tandem/autotune.h"

#include <stdlib.h>

#include <cstdio>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/io/file.h"
#include "common/status/status_macros.h"
#include "tools/tandem/doctor_command.h"

namespace tandem {
namespace cli {

std::vector<AutotuneCandidate> AutotuneCandidates(const LocalOptions& o) {
  std::vector<AutotuneCandidate> c = {{"allreduce", "bucket_cap_mb=25", true},
                                      {"allreduce", "bucket_cap_mb=1"},
                                      {"allreduce", "bucket_cap_mb=4"},
                                      {"allreduce", "bucket_cap_mb=100"}};
  if (o.nodes > 1 && o.workers_per_node > 1) c.push_back({"allreduce", "hier=1,bucket_cap_mb=25"});
  c.push_back({"zero1", ""});
  c.push_back({"zero2", "bucket_cap_mb=25"});
  return c;
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

std::string Describe(const AutotuneCandidate& c) {
  return c.sync_opt.empty() ? c.sync : absl::StrCat(c.sync, " ", c.sync_opt);
}

}  // namespace

std::string FormatAutotune(const AutotuneResult& r) {
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

absl::StatusOr<AutotuneResult> RunAutotune(const LocalOptions& o, const LocalEnv& env) {
  std::string parent = o.run_dir;
  if (parent.empty()) {
    std::string tmpl = "/tmp/tandem-autotune-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError("cannot create a directory for the autotune trials in /tmp");
    }
    parent = tmpl;
  }
  RETURN_IF_ERROR(MakeDirectories(parent));
  AutotuneResult r;
  const std::vector<AutotuneCandidate> candidates = AutotuneCandidates(o);
  std::fprintf(env.out, "autotune: %zu configurations, %d steps each (trials under %s/autotune-N)\n",
               candidates.size(), o.autotune_steps, parent.c_str());
  std::fflush(env.out);
  for (size_t i = 0; i < candidates.size(); ++i) {
    LocalOptions t = o;
    t.autotune = false;
    t.doctor = false;
    t.sync = candidates[i].sync;
    t.sync_opt = candidates[i].sync_opt;
    t.max_steps = o.autotune_steps;
    t.checkpoint_every = 0;
    t.run_dir = absl::StrCat(parent, "/autotune-", i);
    AutotuneTrial trial;
    trial.candidate = candidates[i];
    // The trial's console goes to a file next to its run directory.
    const std::string console = t.run_dir + ".out";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(console.c_str(), "w"),
                                                        &std::fclose);
    if (out == nullptr) return absl::InternalError(absl::StrCat("cannot write ", console));
    LocalEnv trial_env = env;
    trial_env.out = out.get();
    absl::Status s = RunLocal(t, trial_env);
    if (env.stop_requested()) return absl::CancelledError("interrupted during autotune");
    if (s.ok()) {
      auto metrics = LoadRunMetrics(t.run_dir);
      auto step = metrics.ok() ? MeanStepSeconds(*metrics) : metrics.status();
      if (step.ok()) {
        trial.step_seconds = *step;
        // A step consumes batch x micro-batches samples on every worker.
        const int micro = o.accumulation > 0 ? o.accumulation : 1;
        trial.samples_per_second = static_cast<double>(o.batch_size) * micro * o.workers / *step;
      } else {
        trial.error = std::string(step.status().message());
      }
    } else {
      trial.error = absl::StrCat(s.message(), " (see ", console, ")");
    }
    r.trials.push_back(std::move(trial));
  }
  r.chosen = FastestTrial(r.trials);
  if (r.chosen < 0) {
    std::string why;
    for (const AutotuneTrial& t : r.trials) {
      absl::StrAppend(&why, "; ", Describe(t.candidate), ": ", t.error);
    }
    return absl::FailedPreconditionError(absl::StrCat("autotune: no trial ran", why));
  }
  r.chosen_options = o;
  r.chosen_options.autotune = false;
  r.chosen_options.sync = r.trials[r.chosen].candidate.sync;
  r.chosen_options.sync_opt = r.trials[r.chosen].candidate.sync_opt;
  return r;
}

}  // namespace cli
}  // namespace tandem
