// Whether a built-in model can train on a dataset, from the dataset's
// description (common/data/dataset_inputs.h) — checked by `tandem local`
// before anything starts and by every worker before a batch is streamed,
// from the same description read from the dataset's files.
//
//   ASSIGN_OR_RETURN(data::DatasetInputs in, data::ClassifyDataset(info));
//   RETURN_IF_ERROR(CheckModelFitsDataset(spec, in));
//
// An MLP takes dense f32 or u8 features (u8 normalised to [0, 1]) whose
// element count is its input width, and as many classes as it outputs; a
// GPT takes token windows of its context from a vocabulary no larger than
// its own. A torchscript: module passes here: it is checked by running it on
// the samples when it is built. Thread-safe (pure).
#ifndef TANDEM_COMMON_NN_DATASET_FIT_H_
#define TANDEM_COMMON_NN_DATASET_FIT_H_

#include "absl/status/status.h"
#include "common/data/dataset_inputs.h"
#include "common/nn/model_spec.h"

namespace tandem {
namespace nn {

// INVALID_ARGUMENT, saying which spec would fit, when an MLP's input width
// or class count differs from a dense set's, an MLP is given features of a
// dtype it cannot take (i32, i64), or a GPT's context differs from a token
// set's or its vocab is smaller than the set's.
absl::Status CheckModelFitsDataset(const ModelSpec& spec, const data::DatasetInputs& inputs);

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_DATASET_FIT_H_
