#include "common/sync/zero/one_node_pieces.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace sync {

bool OneNodePieces::Usable(const Communicator* comm) {
  return comm != nullptr && comm->world_size() > 1 &&
         dynamic_cast<const ShmCommunicator*>(comm) != nullptr;
}

std::unique_ptr<OneNodePieces> OneNodePieces::Create(Communicator* comm,
                                                     const shard::ZeroShardMap& map) {
  if (!Usable(comm) || map.world() != comm->world_size()) return nullptr;
  return std::unique_ptr<OneNodePieces>(
      new OneNodePieces(static_cast<ShmCommunicator*>(comm), map));
}

OneNodePieces::OneNodePieces(ShmCommunicator* shm, const shard::ZeroShardMap& map)
    : shm_(shm), map_(map), rank_(shm->rank()), bounds_(map.world() + 1, 0) {}

void OneNodePieces::SetBounds(int64_t lo, int64_t hi) {
  const int64_t s = map_.shard_size();
  for (int j = 0; j < map_.world(); ++j) bounds_[j] = std::clamp<int64_t>(j * s, lo, hi);
  bounds_[map_.world()] = hi;
}

absl::Status OneNodePieces::ReduceToOwner(const float* grads, int64_t lo, int64_t hi, float* out,
                                          int64_t* bytes) {
  SetBounds(lo, hi);
  absl::Status s = shm_->ReduceScatterPieces(grads, bounds_.data(), out);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("reduce of [", lo, ", ", hi,
                                               ") to its owners: ", s.message()));
  }
  *bytes += (hi - lo - (bounds_[rank_ + 1] - bounds_[rank_])) * int64_t{sizeof(float)};
  return absl::OkStatus();
}

absl::Status OneNodePieces::Gather(float* params, int64_t lo, int64_t hi, int64_t* bytes) {
  SetBounds(lo, hi);
  absl::Status s = shm_->AllGatherPieces(params, bounds_.data());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("parameter gather of [", lo, ", ", hi,
                                               ") from its owners: ", s.message()));
  }
  *bytes += (bounds_[rank_ + 1] - bounds_[rank_]) * int64_t{sizeof(float)};
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
