// Communicators from one factory: gloo (TCP), shm (one host) and, in CUDA
// builds, nccl (device memory) are built from one Options struct, so no
// caller needs to know which library implements which transport. The NCCL
// half lives in the CUDA library (common/comm/nccl:nccl_transport, an
// alwayslink target that registers "nccl"); a binary that does not link it
// gets a clear error for transport "nccl".
//
//   CommOptions o;  o.transport = "gloo";  o.rank = r;  o.world_size = n;
//   o.store = store;  o.prefix = "gen3/grad";
//   ASSIGN_OR_RETURN(std::unique_ptr<Communicator> c, CreateCommunicator(o));
//
// Every transport registers itself the same way, from its own alwayslink
// target: //common/comm/gloo:gloo_transport, //common/comm/shm:shm_transport,
// //common/comm/nccl:nccl_transport. //common/comm/transports:factory links
// the first two, so every caller has gloo and shm;
// //common/comm/transports:transports adds nccl in CUDA builds.
// (//common/comm:transport_registry is the registry alone.)
//
// Thread-safety: every function is thread-safe. CreateCommunicator is as
// collective as the transport's own Create: every rank of the group calls it
// with the same prefix. Registration normally happens during static
// initialisation. Ownership: the store is borrowed (see CommOptions); the
// caller owns the communicator. Errors: an unknown transport is
// INVALID_ARGUMENT, a known one this binary lacks (nccl without CUDA)
// UNIMPLEMENTED, both naming the transports this binary has; a bad
// rank / world_size or a missing store is INVALID_ARGUMENT; the transport's
// own Create errors pass through.
#ifndef TANDEM_COMMON_COMM_FACTORY_H_
#define TANDEM_COMMON_COMM_FACTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/comm/communicator.h"

namespace gloo {
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace tandem {

struct CommOptions {
  std::string transport = "gloo";  // "gloo", "shm" or "nccl"
  int rank = 0;
  int world_size = 1;
  gloo::rendezvous::Store* store = nullptr;  // borrowed, required (rendezvous)
  // Key prefix in the store, one mesh per prefix (e.g. "gen3/grad"); shm
  // also uses it in its segment name, so it should carry the job id.
  std::string prefix = "tandem";
  std::string hostname = "127.0.0.1";  // gloo: the address peers connect to
  absl::Duration timeout = absl::Seconds(60);
  int64_t shm_chunk_bytes = int64_t{4} << 20;  // shm: staging bytes per rank
  int cuda_device = 0;                         // nccl: this rank's ordinal
  // nccl: the compute stream (cudaStream_t, e.g. Backend::native_stream())
  // each collective waits for; nullptr = the caller synchronises.
  void* cuda_stream = nullptr;
};

using TransportCreator =
    std::function<absl::StatusOr<std::unique_ptr<Communicator>>(const CommOptions&)>;

// Returns true so it can initialise a static; registering a name twice
// aborts at start-up. The creator gets options whose rank, world_size and
// store CreateCommunicator has already checked.
bool RegisterTransport(const std::string& name, TransportCreator creator);
// Transports this binary can build, sorted.
std::vector<std::string> AvailableTransports();
bool TransportAvailable(const std::string& name);
// OK when `name` is available; otherwise the error CreateCommunicator would
// return for it (INVALID_ARGUMENT unknown, UNIMPLEMENTED not linked). For
// checking a flag before any rendezvous.
absl::Status CheckTransport(const std::string& name);

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const CommOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_FACTORY_H_
