#include "tools/tandem/model_check.h"

#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"

namespace tandem {
namespace cli {
namespace {

// What the workers will hand the model: u8 features normalised to f32 (as
// they ask the data server), everything else in the dataset's dtype.
nn::SampleSpec SampleSpecFor(const data::DatasetInputs& in) {
  nn::SampleSpec s;
  s.tokens = in.kind == data::InputKind::kTokens;
  switch (in.normalize_to_f32 ? v1::DTYPE_F32 : in.feature_dtype) {
    case v1::DTYPE_U8: s.dtype = nn::InputDType::kUInt8; break;
    case v1::DTYPE_I32: s.dtype = nn::InputDType::kInt32; break;
    case v1::DTYPE_I64: s.dtype = nn::InputDType::kInt64; break;
    default: s.dtype = nn::InputDType::kFloat32; break;
  }
  s.shape = in.sample_shape;
  if (s.shape.empty()) s.shape = {s.tokens ? in.context : in.sample_elements};
  s.label_shape = in.label_shape;
  s.num_classes = in.num_classes;
  return s;
}

}  // namespace

absl::Status CheckModelOnDataset(const nn::ModelSpec& spec, const data::DatasetInputs& inputs,
                                 const std::string& strategy) {
  if (spec.kind != nn::ModelSpec::Kind::kTorchScript) return absl::OkStatus();
  if (absl::Status s = nn::CheckModelSupportsStrategy(spec, strategy); !s.ok()) return s;
  kernels::CpuBackend backend;
  nn::ModelOptions o;
  o.sample = SampleSpecFor(inputs);
  absl::StatusOr<std::unique_ptr<nn::Model>> m = nn::CreateModel(spec, &backend, o);
  if (absl::IsUnimplemented(m.status())) return absl::InvalidArgumentError(m.status().message());
  return m.status();
}

}  // namespace cli
}  // namespace tandem
