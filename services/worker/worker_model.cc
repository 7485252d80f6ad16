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
  switch (in.dtype) {
    case v1::DTYPE_U8: s.dtype = nn::InputDType::kUInt8; break;
    case v1::DTYPE_I32: s.dtype = nn::InputDType::kInt32; break;
    case v1::DTYPE_I64: s.dtype = nn::InputDType::kInt64; break;
    default: s.dtype = s.tokens ? nn::InputDType::kInt32 : nn::InputDType::kFloat32; break;
  }
  s.shape = in.sample_shape.empty() ? std::vector<int64_t>{in.width} : in.sample_shape;
  s.label_shape = in.label_shape;
  if (s.label_shape.empty() && in.labels_per_sample > 1) s.label_shape = {in.labels_per_sample};
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
