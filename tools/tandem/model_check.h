// `tandem local`'s check of a torchscript: model before anything starts:
// builds it once on the CPU against the dataset's samples (the same checks
// and probe forward the workers run), so a bad module is one line and exit
// status 2 with nothing written. Built-in specs pass (their fit is checked
// by data::CheckModelFitsDataset).
//
//   RETURN_IF_ERROR(CheckModelOnDataset(spec, files.inputs, o.sync));
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

namespace tandem {
namespace cli {

// The window length `tandem local --dataset=fortunes` cuts the text into for
// a torchscript: language model (examples/transformer_lm.py's default).
constexpr int kTorchScriptTextContext = 64;

absl::Status CheckModelOnDataset(const nn::ModelSpec& spec, const data::DatasetInputs& inputs,
                                 const std::string& strategy);

}  // namespace cli
}  // namespace tandem

#endif  // TANDEM_TOOLS_TANDEM_MODEL_CHECK_H_
