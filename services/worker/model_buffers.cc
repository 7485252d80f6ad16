#include "services/worker/model_buffers.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

absl::Status BroadcastModelBuffers(Communicator& ctl, int rank, nn::Model& model,
                                   const std::string* saved, int root) {
  std::string bytes = model.SaveBuffers();
  if (bytes.empty()) return absl::OkStatus();
  if (rank == root && saved != nullptr) bytes = *saved;
  int64_t size = static_cast<int64_t>(bytes.size());
  RETURN_IF_ERROR(ctl.Broadcast(&size, sizeof(size), root));
  bytes.resize(size);
  RETURN_IF_ERROR(ctl.Broadcast(bytes.data(), size, root));
  if (absl::Status s = model.LoadBuffers(bytes); !s.ok()) {
    return absl::DataLossError(absl::StrCat("the model's buffers from rank ", root,
                                            saved != nullptr ? " (the checkpoint's)" : "", ": ",
                                            s.message()));
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
