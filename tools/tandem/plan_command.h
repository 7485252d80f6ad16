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

// The `tandem local` flags a row's strategy runs with ("--sync allreduce
// --sync_opt hier=1" for hier, "--sync compressed --sync_opt codec=topk,
// k=0.01" for compressed:topk=0.01, ...), and the flags every row shares
// (model, batch, workers or simulated nodes, link, optimizer, bucket size).
// Every line is accepted by `tandem local`'s parser and checks.
std::string StrategyLocalFlags(const PlanOptions& o, const std::string& strategy);
std::string CommonLocalFlags(const PlanOptions& o);

// The table (or JSON) for predictions, fastest first; each row (JSON
// field "flags") with the flags that run it.
std::string FormatPlan(const PlanOptions& o, const plan::PlanRequest& request,
                       const std::vector<plan::Prediction>& predictions);

// The whole command; `home` locates the default profile ("" = none). The
// returned text is what to print; calibration notes go first.
absl::StatusOr<std::string> RunPlan(const PlanOptions& o, const std::string& home);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_PLAN_COMMAND_H_
