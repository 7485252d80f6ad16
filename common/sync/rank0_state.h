// Per-rank strategy state (error-feedback residuals, velocities) moved
// through rank 0 for checkpoints, in pieces, so no rank but rank 0 ever
// holds more than its own state plus one piece per rank: every rank's
// local[0, n) into rank 0's gathered[r * n, (r + 1) * n), and back. Used by
// `compressed` and `hybrid`, whose checkpoints carry such state as extra
// blobs written by rank 0.
//
//   std::vector<float> piece(world * std::min(n, kRank0StatePiece));   // sized once
//   RETURN_IF_ERROR(GatherOntoRank0(comm, "compressed sync", "residuals", local, n,
//                                   rank0_gathered, piece.data()));
//
// Collective over `comm` (every rank calls with the same n); `gathered` is
// read or written on rank 0 only. Errors are the communicator's, prefixed
// with `label` and naming `what`. Thread-compatible.
#ifndef TANDEM_COMMON_SYNC_RANK0_STATE_H_
#define TANDEM_COMMON_SYNC_RANK0_STATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/comm/communicator.h"

namespace tandem {
namespace sync {

// Floats per rank moved in one collective.
constexpr int64_t kRank0StatePiece = int64_t{1} << 16;

// `piece` holds comm.world_size() * min(n, kRank0StatePiece) floats.
absl::Status GatherOntoRank0(Communicator& comm, absl::string_view label, absl::string_view what,
                             const float* local, int64_t n, float* gathered, float* piece);
// Rank r's local[0, n) = rank 0's gathered[r * n, (r + 1) * n).
absl::Status SendBackFromRank0(Communicator& comm, absl::string_view label,
                               absl::string_view what, float* gathered, int64_t n, float* local,
                               float* piece);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_RANK0_STATE_H_
