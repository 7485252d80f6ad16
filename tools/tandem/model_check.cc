#include "tools/tandem/model_check.h"

#include <algorithm>

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

absl::StatusOr<std::unique_ptr<nn::Model>> BuildOnCpu(const nn::ModelSpec& spec,
                                                      const data::DatasetInputs& inputs,
                                                      kernels::CpuBackend* backend) {
  nn::ModelOptions o;
  o.sample = SampleSpecFor(inputs);
  absl::StatusOr<std::unique_ptr<nn::Model>> m = nn::CreateModel(spec, backend, o);
  if (absl::IsUnimplemented(m.status())) return absl::InvalidArgumentError(m.status().message());
  return m;
}

}  // namespace

absl::StatusOr<plan::ModelCost> GradientCostOf(const nn::ModelSpec& spec,
                                               const data::DatasetInputs& inputs) {
  if (spec.kind != nn::ModelSpec::Kind::kTorchScript) return plan::ModelCostOf(spec);
  kernels::CpuBackend backend;
  absl::StatusOr<std::unique_ptr<nn::Model>> m = BuildOnCpu(spec, inputs, &backend);
  if (!m.ok()) return m.status();
  const tensor::ParameterLayout& layout = (*m)->layout();
  plan::ModelCost c;
  c.parameters = layout.num_elements();
  c.flat_size = layout.total_size();
  // Each parameter's extent runs to the next one's offset (padding
  // included), so the groups tile [0, flat_size).
  std::vector<tensor::ParameterInfo> by_offset = layout.params();
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const int64_t end = i + 1 < by_offset.size() ? by_offset[i + 1].offset : c.flat_size;
    const int g = by_offset[i].group;
    if (g >= static_cast<int>(c.groups_backward.size())) c.groups_backward.resize(g + 1, 0);
    c.groups_backward[g] += end - by_offset[i].offset;
  }
  return c;
}

absl::Status CheckModelOnDataset(const nn::ModelSpec& spec, const data::DatasetInputs& inputs,
                                 const std::string& strategy) {
  if (spec.kind != nn::ModelSpec::Kind::kTorchScript) return absl::OkStatus();
  if (absl::Status s = nn::CheckModelSupportsStrategy(spec, strategy); !s.ok()) return s;
  kernels::CpuBackend backend;
  return BuildOnCpu(spec, inputs, &backend).status();
}

}  // namespace cli
}  // namespace tandem
