#include "common/nn/dataset_fit.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace nn {
namespace {

absl::Status CheckMlp(const ModelSpec& spec, const data::DatasetInputs& in) {
  if (in.kind != data::InputKind::kDense) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.ToString(), " is an MLP but the dataset holds token windows of ",
        in.context, "; use a gpt: model with context=", in.context, ",vocab=",
        in.num_classes));
  }
  if (in.feature_dtype != v1::DTYPE_F32 && in.feature_dtype != v1::DTYPE_U8) {
    v1::Tensor f;
    f.set_dtype(in.feature_dtype);
    for (int64_t d : in.sample_shape) f.add_shape(d);
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.ToString(), " takes float32 or uint8 features, but the dataset's are ",
        data::DescribeSpec(f), "; convert them to float32 (e.g. X.astype('float32') before "
        "tandem convert) or train a model that takes integer inputs"));
  }
  const std::vector<int>& w = spec.mlp.widths;
  if (w.front() != in.sample_elements || w.back() != in.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.ToString(), " takes ", w.front(), " inputs and gives ", w.back(),
        " classes, but the dataset has ", in.sample_elements, " (samples [",
        absl::StrJoin(in.sample_shape, ","), "]) and ", in.num_classes, "; use mlp:",
        in.sample_elements, ",...,", in.num_classes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelFitsDataset(const ModelSpec& spec, const data::DatasetInputs& in) {
  // A TorchScript module is checked by running it on the samples when it is
  // built (common/torchscript).
  if (spec.kind == ModelSpec::Kind::kTorchScript) return absl::OkStatus();
  if (spec.kind == ModelSpec::Kind::kMlp) return CheckMlp(spec, in);
  if (in.kind != data::InputKind::kTokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.ToString(), " is a GPT but the dataset holds dense samples of ",
        in.sample_elements, " elements; use an mlp: model or a token dataset"));
  }
  if (spec.gpt.context != in.context || spec.gpt.vocab < in.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.ToString(), " has context ", spec.gpt.context, " and vocab ",
        spec.gpt.vocab, ", but the dataset's windows are ", in.context,
        " tokens from a vocabulary of ", in.num_classes, "; use context=", in.context,
        " and vocab >= ", in.num_classes, " (or convert the text with --seq_len=",
        spec.gpt.context, ")"));
  }
  return absl::OkStatus();
}

}  // namespace nn
}  // namespace tandem
