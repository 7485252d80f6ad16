// The POSIX shared-memory segment behind a shm group (shm_communicator.h):
// its name, its creation by rank 0 (pages reserved up front, so a full
// /dev/shm is an error at connect, not a SIGBUS mid-collective) and its
// opening by the other ranks from the name rank 0 published in the store.
// Each returns an open file descriptor the caller maps and closes; errors
// name the rank, the segment and what to change. Thread-safe (no state).
#ifndef TANDEM_COMMON_COMM_SHM_SHM_SEGMENT_H_
#define TANDEM_COMMON_COMM_SHM_SHM_SEGMENT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"

namespace tandem {

// "/tandem-<prefix, sanitised>-<pid>-<random>".
std::string ShmSegmentName(absl::string_view prefix);

// Rank 0: creates segment `name` of `bytes` (exclusive). UNAVAILABLE when it
// cannot be created, RESOURCE_EXHAUSTED when its pages cannot be reserved
// (then it is unlinked again).
absl::StatusOr<int> CreateShmSegment(const std::string& name, size_t bytes);

// Other ranks: waits up to `timeout` for the name under `key` (into *name)
// and opens that segment, which must be `bytes` long. DEADLINE_EXCEEDED,
// UNAVAILABLE, or FAILED_PRECONDITION when the ranks disagree on its size.
absl::StatusOr<int> OpenShmSegment(gloo::rendezvous::Store& store, const std::string& key,
                                   int rank, absl::Duration timeout, size_t bytes,
                                   std::string* name);

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_SHM_SHM_SEGMENT_H_
