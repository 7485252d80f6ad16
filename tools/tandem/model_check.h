// `tandem local`'s check of a torchscript: model before anything starts:
// builds it once on the CPU against the dataset's samples (the same checks
// and probe forward the workers run), so a bad module is one line and exit
// status 2 with nothing written. Built-in specs pass (their fit is checked
// by data::CheckModelFitsDataset).
//
//   RETURN_IF_ERROR(CheckModelOnDataset(spec, files.inputs, o.sync));
//
// autotune's bucket plan needs the gradient's shape, which for a
// torchscript: module only the module can tell:
//
//   ASSIGN_OR_RETURN(plan::ModelCost c, GradientCostOf(spec, files.inputs));
//   plan::BucketCount(c, 25);
//
// Thread-safe (no shared state). Failure: INVALID_ARGUMENT naming the file
// and the problem, or the strategy that cannot train it; UNIMPLEMENTED
// (reported as INVALID_ARGUMENT) for torchscript: without libtorch.
#ifndef TANDEM_TOOLS_TANDEM_MODEL_CHECK_H_
#define TANDEM_TOOLS_TANDEM_MODEL_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "common/data/dataset_inputs.h"
#include "common/nn/model_spec.h"
#include "common/plan/model_cost.h"

namespace tandem {
namespace cli {

// The window length `tandem local --dataset=fortunes` cuts the text into for
// a torchscript: language model (examples/transformer_lm.py's default).
constexpr int kTorchScriptTextContext = 64;

absl::Status CheckModelOnDataset(const nn::ModelSpec& spec, const data::DatasetInputs& inputs,
                                 const std::string& strategy);

// What gradient buckets are planned over: the parameter count, flat size
// and flat elements per parameter group in backward order. A built-in
// spec's whole plan::ModelCostOf; a torchscript: module's from the layout
// the workers give it (built once on the CPU against the dataset's
// samples), its FLOPs and activations left 0 (not readable from the
// archive). Errors as CheckModelOnDataset.
absl::StatusOr<plan::ModelCost> GradientCostOf(const nn::ModelSpec& spec,
                                               const data::DatasetInputs& inputs);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_MODEL_CHECK_H_
