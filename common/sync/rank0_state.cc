#include "common/sync/rank0_state.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace sync {

absl::Status GatherOntoRank0(Communicator& comm, absl::string_view label, absl::string_view what,
                             const float* local, int64_t n, float* gathered, float* piece) {
  const int world = comm.world_size();
  for (int64_t off = 0; off < n; off += kRank0StatePiece) {
    const int64_t c = std::min(kRank0StatePiece, n - off);
    absl::Status s = comm.AllGather(local + off, piece, c * sizeof(float));
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(label, ": gathering the ", what,
                                                 " onto rank 0 for a checkpoint: ", s.message()));
    }
    if (comm.rank() != 0) continue;
    for (int r = 0; r < world; ++r) {
      std::memcpy(gathered + r * n + off, piece + r * c, c * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status SendBackFromRank0(Communicator& comm, absl::string_view label,
                               absl::string_view what, float* gathered, int64_t n, float* local,
                               float* piece) {
  const int world = comm.world_size();
  const int rank = comm.rank();
  if (rank == 0) std::copy(gathered, gathered + n, local);
  absl::Status s;
  for (int r = 1; r < world && s.ok(); ++r) {
    for (int64_t off = 0; off < n && s.ok(); off += kRank0StatePiece) {
      const int64_t c = std::min(kRank0StatePiece, n - off);
      float* buf = rank == 0 ? gathered + r * n + off : piece;
      s = comm.Broadcast(buf, c * sizeof(float), 0);
      if (s.ok() && rank == r) std::memcpy(local + off, buf, c * sizeof(float));
    }
  }
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(label, ": sending the checkpoint's ", what,
                                               " from rank 0: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
