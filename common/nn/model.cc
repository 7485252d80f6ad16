#include "common/nn/model.h"

#include "absl/strings/str_cat.h"
#include "common/nn/gpt.h"
#include "common/nn/mlp.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace nn {

std::vector<GradRange> GroupRanges(const tensor::ParameterLayout& layout) {
  std::vector<GradRange> ranges;
  for (int i = 0; i < layout.num_params(); ++i) {
    const tensor::ParameterInfo& p = layout.param(i);
    if (ranges.empty() || ranges.back().group != p.group) {
      GradRange r;
      r.group = p.group;
      r.first_param = i;
      r.lo = ranges.empty() ? 0 : ranges.back().hi;
      ranges.push_back(r);
    }
    ranges.back().end_param = i + 1;
    ranges.back().hi = p.offset + p.size;
  }
  if (!ranges.empty()) ranges.back().hi = layout.total_size();
  return ranges;
}

namespace {

ModelFactory& TorchScriptFactory() {
  static ModelFactory* factory = new ModelFactory();
  return *factory;
}

}  // namespace

bool RegisterTorchScriptFactory(ModelFactory factory) {
  TorchScriptFactory() = std::move(factory);
  return true;
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    const ModelSpec& spec, kernels::Backend* backend,
    const ModelOptions& options) {
  if (spec.kind == ModelSpec::Kind::kTorchScript) {
    if (!TorchScriptFactory()) {
      return absl::UnimplementedError(absl::StrCat(
          "this build has no TorchScript support for ", spec.ToString(), " (libtorch was "
          "not found when it was built); install libtorch-dev and python3-torch "
          "(tools/setup.sh does) and rebuild, or set TANDEM_LIBTORCH_PATH to a libtorch "
          "folder"));
    }
    return TorchScriptFactory()(spec, backend, options);
  }
  if (spec.kind == ModelSpec::Kind::kMlp) {
    ASSIGN_OR_RETURN(std::unique_ptr<MlpClassifier> m,
                     MlpClassifier::Create(spec, backend, options));
    return std::unique_ptr<Model>(std::move(m));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GptModel> m,
                   GptModel::Create(spec, backend, options));
  return std::unique_ptr<Model>(std::move(m));
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(
    absl::string_view spec, kernels::Backend* backend,
    const ModelOptions& options) {
  ASSIGN_OR_RETURN(ModelSpec parsed, ParseModelSpec(spec));
  return CreateModel(parsed, backend, options);
}

}  // namespace nn
}  // namespace tandem
