// PinnedStaging: HostStaging in page-locked host memory (cudaHostAlloc),
// for checkpoints of a model that lives on a GPU (host_staging.h). The
// device-to-host copy of the parameters at a checkpoint's step boundary
// then runs at the link's full rate instead of through the driver's
// pageable bounce buffer.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<HostStaging> s, MakePinnedStaging());
//
// MakePinnedStaging fails with UNAVAILABLE when no CUDA device can be used
// (a CPU-only machine): the caller keeps pageable staging. Reserve grows
// the buffer (free + allocate) only when n grows, else reuses it; a failed
// allocation is RESOURCE_EXHAUSTED naming the bytes. Compiles without a
// GPU (links the CUDA runtime). Thread-compatible; owns its memory.
#ifndef TANDEM_SERVICES_WORKER_PINNED_STAGING_H_
#define TANDEM_SERVICES_WORKER_PINNED_STAGING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "services/worker/host_staging.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::unique_ptr<HostStaging>> MakePinnedStaging();

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_PINNED_STAGING_H_
