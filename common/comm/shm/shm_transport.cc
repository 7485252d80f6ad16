// The "shm" transport of the communicator factory (common/comm/factory.h):
// linking this alwayslink target registers it, as nccl_transport does for
// "nccl". //common/comm/transports:factory links gloo and shm, so every
// binary that can call CreateCommunicator has them.
#include <memory>
#include <utility>

#include "common/comm/factory.h"
#include "common/comm/shm/shm_communicator.h"

namespace tandem {
namespace {

absl::StatusOr<std::unique_ptr<Communicator>> CreateShm(const CommOptions& o) {
  ShmOptions s;
  s.rank = o.rank;
  s.world_size = o.world_size;
  s.store = o.store;
  s.prefix = o.prefix;
  s.chunk_bytes = o.shm_chunk_bytes;
  s.timeout = o.timeout;
  absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(s);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(std::move(*c));
}

// alwayslink keeps this initialiser: nothing references this file's symbols.
[[maybe_unused]] const bool kShmRegistered = RegisterTransport("shm", CreateShm);

}  // namespace
}  // namespace tandem
