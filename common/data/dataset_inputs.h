// What a worker feeds its model from a served dataset, decided from the
// dataset's tandem.v1.DatasetInfo (its description): dense samples with a
// class label each, or token windows with next-token labels. The fit of a
// particular model is checked by common/nn/dataset_fit.h.
//
//   ASSIGN_OR_RETURN(v1::DatasetInfo info,
//                    FetchDatasetInfo(servers, "fortunes/train", RetryOptions{}));
//   ASSIGN_OR_RETURN(DatasetInputs in, ClassifyDataset(info));
//   request.set_normalize_to_f32(in.normalize_to_f32);
//
// The forms (anything else is INVALID_ARGUMENT naming the dtypes/shapes):
//   dense:  features f32, u8, i32 or i64 of any per-sample shape (at most
//           kMaxSampleRank dimensions), labels i32 [] (a class index);
//           num_classes > 0. normalize_to_f32 is set for u8 features (what a
//           model that takes f32 asks the server for: f32 in [0, 1]).
//   tokens: features i32 [ctx], labels i32 [ctx] (next-token targets, as
//           `tandem convert --mode=tokens|text` writes); num_classes = vocab.
// Every form also carries the typed description (feature dtype, per-sample
// feature and label shapes) that nn::Batch hands to models taking any
// dtype and shape.
//
// Thread-safe (pure functions).
#ifndef TANDEM_COMMON_DATA_DATASET_INPUTS_H_
#define TANDEM_COMMON_DATA_DATASET_INPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/dataserver.pb.h"

namespace tandem {
namespace data {

enum class InputKind { kDense, kTokens };

struct DatasetInputs {
  InputKind kind = InputKind::kDense;
  int64_t sample_elements = 0;  // dense: product of the feature shape
  int64_t context = 0;          // tokens: ctx
  int num_classes = 0;          // dense: classes; tokens: vocabulary
  bool normalize_to_f32 = false;  // what a model taking f32 should ask for
  // The description as stored: feature dtype, per-sample feature shape
  // (e.g. {1, 28, 28}) and per-sample label shape ({} or {ctx}).
  v1::DType feature_dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> sample_shape;
  std::vector<int64_t> label_shape;
};

absl::StatusOr<DatasetInputs> ClassifyDataset(const v1::DatasetInfo& info);

// "f32 [1,28,28]": a spec's dtype and shape as messages show them.
std::string DescribeSpec(const v1::Tensor& spec);

}  // namespace data
}  // namespace tandem

#endif  // TANDEM_COMMON_DATA_DATASET_INPUTS_H_
