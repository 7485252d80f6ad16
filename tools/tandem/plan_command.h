// `tandem plan`: turns PlanOptions into a cost-model request (common/plan),
// optionally calibrates this machine first, and prints every strategy's
// prediction as a table (or JSON) with a recommendation.
//
//   ASSIGN_OR_RETURN(std::string text, RunPlan(options, home));
//
// Failure: a bad model, rate, count or profile file is INVALID_ARGUMENT (or
// the profile's own error) with a message naming the flag; nothing is
// written unless --calibrate succeeded. Not thread-safe while calibrating
// (it measures the machine).
#ifndef TANDEM_TOOLS_TANDEM_PLAN_COMMAND_H_
#define TANDEM_TOOLS_TANDEM_PLAN_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/plan/strategy_cost.h"
#include "tools/tandem/commands.h"

namespace tandem {
namespace cli {

// The request the options describe, with `profile` as the machine.
absl::StatusOr<plan::PlanRequest> PlanRequestFrom(const PlanOptions& o,
                                                  const plan::MachineProfile& profile);

// The table (or JSON) for predictions, fastest first.
std::string FormatPlan(const plan::PlanRequest& request,
                       const std::vector<plan::Prediction>& predictions, bool json);

// The whole command; `home` locates the default profile ("" = none). The
// returned text is what to print; calibration notes go first.
absl::StatusOr<std::string> RunPlan(const PlanOptions& o, const std::string& home);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_PLAN_COMMAND_H_
