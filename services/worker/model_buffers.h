// The model's registered buffers (nn::Model::SaveBuffers: BatchNorm running
// statistics of a torchscript: module) made the same on every rank: rank
// 0's copy (or `saved`, a checkpoint's, on rank 0) broadcast over the
// control mesh and loaded everywhere (`root`'s instead of rank 0's: a
// recovery from memory takes the source rank's). The checkpointer calls it on every
// restore (start, re-join, generation change); with --broadcast_buffers the
// trainer also after every step, as PyTorch DDP does by default.
//
//   RETURN_IF_ERROR(BroadcastModelBuffers(*g.ctl, g.rank(), model, nullptr));
//
// Collective (every rank at the same point). No collective at all for a
// model without buffers (every rank runs the same model, so all agree).
// Thread-compatible. Failure: the communicator's error; DATA_LOSS when the
// bytes do not fit the model.
#ifndef TANDEM_SERVICES_WORKER_MODEL_BUFFERS_H_
#define TANDEM_SERVICES_WORKER_MODEL_BUFFERS_H_

#include <string>

#include "absl/status/status.h"
#include "common/comm/communicator.h"
#include "common/nn/model.h"

namespace tandem {
namespace worker {

absl::Status BroadcastModelBuffers(Communicator& ctl, int rank, nn::Model& model,
                                   const std::string* saved, int root = 0);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_MODEL_BUFFERS_H_
