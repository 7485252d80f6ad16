// The worker's model: nn::CreateModel with the options the worker's flags
// give. A torchscript: module is checked against the dataset's samples when
// it is built (one probe forward and backward), so the trainer builds it
// after the dataset probe; the built-in models are built at once.
//
//   if (!ModelNeedsDataset(o)) model = *CreateWorkerModel(o, backend, nullptr);
//   ...probe the data servers...
//   if (model == nullptr) model = *CreateWorkerModel(o, backend, &probe.inputs);
//
// Thread-safe (no shared state). Failure: CreateModel's (INVALID_ARGUMENT
// for a bad spec or module, UNIMPLEMENTED for torchscript: without libtorch).
#ifndef TANDEM_SERVICES_WORKER_WORKER_MODEL_H_
#define TANDEM_SERVICES_WORKER_WORKER_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "services/worker/dataset_probe.h"
#include "services/worker/trainer_options.h"

namespace tandem {
namespace worker {

bool ModelNeedsDataset(const TrainerOptions& options);

// `inputs` may be null for a model that does not need the dataset.
absl::StatusOr<std::unique_ptr<nn::Model>> CreateWorkerModel(const TrainerOptions& options,
                                                              kernels::Backend* backend,
                                                              const InputSpec* inputs);

// The sample description a model is checked against, from the probe.
nn::SampleSpec SampleSpecOf(const InputSpec& inputs);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_WORKER_MODEL_H_
