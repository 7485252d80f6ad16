// The "gloo" transport of the communicator factory (common/comm/factory.h):
// linking this alwayslink target registers it, as nccl_transport does for
// "nccl". //common/comm/transports:factory links gloo and shm, so every
// binary that can call CreateCommunicator has them.
#include <memory>
#include <utility>

#include "common/comm/factory.h"
#include "common/comm/gloo/gloo_communicator.h"

namespace tandem {
namespace {

absl::StatusOr<std::unique_ptr<Communicator>> CreateGloo(const CommOptions& o) {
  GlooOptions g;
  g.rank = o.rank;
  g.world_size = o.world_size;
  g.store = o.store;
  g.prefix = o.prefix;
  g.hostname = o.hostname;
  g.timeout = o.timeout;
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> c = GlooCommunicator::Create(g);
  if (!c.ok()) return c.status();
  return std::unique_ptr<Communicator>(std::move(*c));
}

// alwayslink keeps this initialiser: nothing references this file's symbols.
[[maybe_unused]] const bool kGlooRegistered = RegisterTransport("gloo", CreateGloo);

}  // namespace
}  // namespace tandem
