#include "services/worker/worker_model.h"

#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

bool ModelNeedsDataset(const TrainerOptions& o) {
  absl::StatusOr<nn::ModelSpec> spec = nn::ParseModelSpec(o.model);
  return spec.ok() && spec->kind == nn::ModelSpec::Kind::kTorchScript;
}

nn::SampleSpec SampleSpecOf(const InputSpec& in) {
  nn::SampleSpec s;
  s.tokens = in.kind == InputSpec::Kind::kTokens;
  s.shape = {in.width};
  s.num_classes = in.num_classes;
  return s;
}

absl::StatusOr<std::unique_ptr<nn::Model>> CreateWorkerModel(const TrainerOptions& o,
                                                              kernels::Backend* backend,
                                                              const InputSpec* inputs) {
  nn::ModelOptions mo;
  mo.max_batch = static_cast<int>(LocalBatchCapacity(o));
  mo.seed = o.seed;
  mo.torch_threads = o.torch_threads;
  if (inputs != nullptr) mo.sample = SampleSpecOf(*inputs);
  return nn::CreateModel(o.model, backend, mo);
}

}  // namespace worker
}  // namespace tandem
