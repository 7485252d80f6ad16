// `tandem doctor`'s inputs and output: loads a run directory's metric
// snapshots (RUN_DIR/metrics/NAME.prom: workers write theirs as they exit,
// tandem local scrapes the services before stopping them) or scrapes live
// addresses, then runs doctor.h's Diagnose and formats it.
//
//   ASSIGN_OR_RETURN(std::string report, RunDoctor(options));
//
// Failure: neither --run_dir nor --metrics, an unreadable directory, an
// unparsable snapshot, an unreachable address or a bad --link are errors
// naming the file, address or flag. Not thread-safe (reads the filesystem
// and the network; call from one thread).
#ifndef TANDEM_TOOLS_TANDEM_DOCTOR_COMMAND_H_
#define TANDEM_TOOLS_TANDEM_DOCTOR_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/tandem/commands.h"
#include "tools/tandem/doctor.h"

namespace tandem {
namespace cli {

// RUN_DIR/metrics/*.prom, one ProcessMetrics per file (named after it).
absl::StatusOr<std::vector<ProcessMetrics>> LoadRunMetrics(const std::string& run_dir);

absl::StatusOr<std::string> RunDoctor(const DoctorCliOptions& o);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_DOCTOR_COMMAND_H_
