// What a worker feeds its model from a served dataset, decided from the
// dataset's tandem.v1.DatasetInfo (DataServer.ListDatasets): dense samples
// for an MLP, or token windows for a GPT.
//
//   ASSIGN_OR_RETURN(v1::DatasetInfo info,
//                    FetchDatasetInfo(servers, "fortunes/train", RetryOptions{}));
//   ASSIGN_OR_RETURN(DatasetInputs in, ClassifyDataset(info));
//   RETURN_IF_ERROR(CheckModelFitsDataset(spec, in));
//   request.set_normalize_to_f32(in.normalize_to_f32);
//   // kDense: nn::Batch{.features = f32 [n, in.sample_elements], .labels = i32 [n]}
//   // kTokens: nn::Batch{.tokens = i32 [n, in.context], .labels = i32 [n, in.context]}
//
// The forms (anything else is INVALID_ARGUMENT naming the dtypes/shapes):
//   dense:  features u8 or f32 of any per-sample shape, labels i32 [] (a
//           class index); num_classes > 0. u8 features are requested as f32
//           in [0, 1] (normalize_to_f32); f32 features as they are.
//   tokens: features i32 [ctx], labels i32 [ctx] (next-token targets, as
//           tools/convert --mode=tokens|text writes); num_classes = vocab.
//
// Thread-safe (pure functions; FetchDatasetInfo makes its own channels).
#ifndef TANDEM_COMMON_DATA_DATASET_INPUTS_H_
#define TANDEM_COMMON_DATA_DATASET_INPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/nn/model_spec.h"
#include "common/rpc/channel.h"
#include "proto/dataserver.pb.h"

namespace tandem {
namespace data {

enum class InputKind { kDense, kTokens };

struct DatasetInputs {
  InputKind kind = InputKind::kDense;
  int64_t sample_elements = 0;  // dense: product of the feature shape
  int64_t context = 0;          // tokens: ctx
  int num_classes = 0;          // dense: classes; tokens: vocabulary
  bool normalize_to_f32 = false;  // what StreamBatchesRequest should ask
};

absl::StatusOr<DatasetInputs> ClassifyDataset(const v1::DatasetInfo& info);

// INVALID_ARGUMENT, saying which spec would fit, when an MLP's input width
// or class count differs from a dense set's, or a GPT's context differs
// from a token set's or its vocab is smaller than the set's.
absl::Status CheckModelFitsDataset(const nn::ModelSpec& spec, const DatasetInputs& inputs);

// The DatasetInfo named `dataset` from the first of `servers` ("host:port")
// that answers ListDatasets (each tried with `retry`). NOT_FOUND listing
// the server's datasets when it has no such one; the last server's error
// when none answers; INVALID_ARGUMENT for an empty server list.
absl::StatusOr<v1::DatasetInfo> FetchDatasetInfo(const std::vector<std::string>& servers,
                                                 const std::string& dataset,
                                                 const RetryOptions& retry);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_DATASET_INPUTS_H_
