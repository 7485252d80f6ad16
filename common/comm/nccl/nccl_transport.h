// The "nccl" transport of the communicator factory (common/comm/factory.h):
// linking this alwayslink target registers it, so CreateCommunicator builds
// a NcclCommunicator from CommOptions (device = cuda_device, wait_stream =
// cuda_stream, the unique id through CommOptions::store). CUDA builds only.
//
// NcclKvOverStore adapts a gloo::rendezvous::Store (the coordinator store,
// which throws) to NcclKv (which returns Statuses): put failures are
// UNAVAILABLE, get failures (a key that never came, a dead coordinator)
// DEADLINE_EXCEEDED, each naming the key. The store is borrowed and must
// outlive the returned functions (NcclCommunicator uses them only inside
// Create). Thread-safe as far as the store is.
#ifndef TANDEM_COMMON_COMM_NCCL_NCCL_TRANSPORT_H_
#define TANDEM_COMMON_COMM_NCCL_NCCL_TRANSPORT_H_

#include "common/comm/nccl/nccl_communicator.h"
#include "gloo/rendezvous/store.h"

namespace tandem {

NcclKv NcclKvOverStore(gloo::rendezvous::Store* store);

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_NCCL_NCCL_TRANSPORT_H_
