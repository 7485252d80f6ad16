#include "tools/tandem/doctor_command.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "common/metrics/scrape.h"
#include "common/status/status_macros.h"
#include "common/sync/registry.h"
#include "tools/tandem/link_rate.h"

namespace tandem {
namespace cli {

absl::StatusOr<std::vector<ProcessMetrics>> LoadRunMetrics(const std::string& run_dir) {
  const std::string dir = run_dir + "/metrics";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "no metrics in ", run_dir, " (", dir,
        " is missing: give a run directory written by tandem local, or --metrics addresses)"));
  }
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (absl::EndsWith(name, ".prom")) files.push_back(name);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  std::vector<ProcessMetrics> out;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(dir + "/" + f));
    auto samples = ParsePromText(text);
    if (!samples.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, "/", f, ": ", samples.status().message()));
    }
    out.push_back({f.substr(0, f.size() - 5), std::move(*samples)});
  }
  return out;
}

absl::StatusOr<std::string> RunDoctor(const DoctorCliOptions& o) {
  if (o.run_dir.empty() == o.metrics.empty()) {
    return absl::InvalidArgumentError(
        "give either --run_dir (a tandem local run directory) or --metrics host:port,...");
  }
  std::vector<ProcessMetrics> job;
  if (!o.run_dir.empty()) {
    ASSIGN_OR_RETURN(job, LoadRunMetrics(o.run_dir));
  } else {
    for (const std::string& address : o.metrics) {
      ASSIGN_OR_RETURN(std::string text, ScrapeMetrics(address, o.timeout));
      auto samples = ParsePromText(text);
      if (!samples.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(address, ": ", samples.status().message()));
      }
      job.push_back({address, std::move(*samples)});
    }
  }
  DoctorOptions d;
  if (!o.link.empty()) {
    auto bps = ParseLinkRate(o.link);
    if (!bps.ok()) return absl::InvalidArgumentError(absl::StrCat("--link: ", bps.status().message()));
    d.link_bits_per_s = static_cast<double>(*bps);
  }
  for (const sync::StrategyInfo& s : sync::RegisteredStrategies()) d.strategies.push_back(s.name);
  if (!o.run_dir.empty()) {
    // How the workers ran: what tandem local started them with.
    auto cmd = ReadFileToString(o.run_dir + "/worker-0.cmd");
    d.hier = cmd.ok() && absl::StrContains(*cmd, "--sync_opt=") &&
             std::regex_search(*cmd, std::regex("--sync_opt=\\S*\\bhier=1\\b"));
  }
  if (const char* core = getenv("OPENBLAS_CORETYPE"); core != nullptr) d.user_coretype = core;
  // Memory per worker: this host's RAM shared by the workers of the job
  // (tandem local runs them all here).
  int workers = 0;
  for (const ProcessMetrics& p : job) {
    if (FindSample(p.samples, "tandem_step_phase_seconds_total")) ++workers;
  }
  const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  if (workers > 0 && ram > 0 && !o.run_dir.empty()) d.memory_bytes_per_worker = ram / workers;
  ASSIGN_OR_RETURN(Diagnosis diagnosis, Diagnose(job, d));
  return FormatDiagnosis(diagnosis);
}

}  // namespace cli
}  // namespace tandem
