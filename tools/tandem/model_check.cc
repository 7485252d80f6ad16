#include "tools/tandem/model_check.h"

#include "common/kernels/cpu_backend.h"
#include "common/nn/model.h"

namespace tandem {
namespace cli {

absl::Status CheckModelOnDataset(const nn::ModelSpec& spec, bool tokens, int features,
                                 int classes, const std::string& strategy) {
  if (spec.kind != nn::ModelSpec::Kind::kTorchScript) return absl::OkStatus();
  if (absl::Status s = nn::CheckModelSupportsStrategy(spec, strategy); !s.ok()) return s;
  kernels::CpuBackend backend;
  nn::ModelOptions o;
  o.sample.tokens = tokens;
  o.sample.shape = {features};
  o.sample.num_classes = classes;
  absl::StatusOr<std::unique_ptr<nn::Model>> m = nn::CreateModel(spec, &backend, o);
  if (absl::IsUnimplemented(m.status())) return absl::InvalidArgumentError(m.status().message());
  return m.status();
}

}  // namespace cli
}  // namespace tandem
