// BatchStager: turns a batch from the data servers (host bytes in the
// prefetch client's reusable buffers) into the model's nn::Batch. On a
// host-accessible backend (CPU) the model reads the prefetch buffers in
// place: no copy. On a device backend (CUDA) the batch is copied into
// device buffers allocated once, for the largest batch, at Create. Those
// copies go through Backend::CopyToDevice, which the CUDA backend stages
// through its pinned ring and enqueues on its stream without waiting: Stage
// returns while the device may still be running the previous step, so the
// host fetches and checks the next batch (and the DMA is queued) while the
// device computes. The next Stage overwrites the device buffers in stream
// order, after every kernel queued before it has read them.
//
//   ASSIGN_OR_RETURN(auto stager, BatchStager::Create(backend, probe.inputs, batch_size));
//   ASSIGN_OR_RETURN(nn::Batch b, stager->Stage(*host_batch));
//   model->Forward(b);
//
// Every Batch carries the typed view (nn::Batch::inputs, inputs_dtype,
// sample_shape, label_shape) of the dataset's description; `features` is set
// for f32 inputs and `tokens` for token windows, as the built-in models read
// them.
//
// The returned Batch points into `host_batch` (CPU) or the stager's device
// buffers (device): valid until the next Stage or until `host_batch` is
// reused. Thread-compatible (one thread: the trainer's). Owns its device
// buffers; the backend is borrowed and must outlive it. Failure: a batch of
// the wrong dtypes is INVALID_ARGUMENT, one whose byte counts do not match
// its sample count DATA_LOSS, one larger than max_batch INVALID_ARGUMENT,
// a failed copy the backend's error.
#ifndef TANDEM_SERVICES_WORKER_BATCH_STAGER_H_
#define TANDEM_SERVICES_WORKER_BATCH_STAGER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/data/prefetch_client.h"
#include "common/kernels/backend.h"
#include "common/nn/model.h"
#include "services/worker/dataset_probe.h"

namespace tandem {
namespace worker {

class BatchStager {
 public:
  static absl::StatusOr<std::unique_ptr<BatchStager>> Create(kernels::Backend* backend,
                                                             const InputSpec& inputs,
                                                             int max_batch);
  ~BatchStager();
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  absl::StatusOr<nn::Batch> Stage(const data::HostBatch& batch);

  // Labels of the last staged batch on the host (for evaluation).
  const int32_t* host_labels() const { return host_labels_; }

 private:
  BatchStager(kernels::Backend* backend, const InputSpec& inputs, int max_batch)
      : backend_(backend), inputs_(inputs), max_batch_(max_batch) {}

  kernels::Backend* const backend_;
  const InputSpec inputs_;
  const int max_batch_;
  nn::Batch typed_;                 // the typed description every Batch carries
  int64_t input_element_bytes_ = 4;
  void* device_inputs_ = nullptr;   // device backends only, sized for max_batch
  int32_t* device_labels_ = nullptr;
  const int32_t* host_labels_ = nullptr;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_BATCH_STAGER_H_
