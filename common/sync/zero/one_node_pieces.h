// OneNodePieces: ZeRO's two collectives when the whole world is one node
// over shared memory (ShmCommunicator): a range of the flat vector reduced
// to the owners of its pieces, and the owners' pieces of a range gathered
// to every rank, each one pass of the shm allreduce's kernel over the
// pieces where they lie (ReduceScatterPieces / AllGatherPieces), with no
// packing into equal blocks, no staging of this rank's own piece, and one
// collective per range. On one node a zero2 step is then the shm
// allreduce's two halves with the optimizer step on the owned slice in
// between: the same bytes through the segment (this rank stages the others'
// pieces once, reduces its own, and after the step copies its slice in and
// the others' out) and the same rank-order sums, bit for bit.
//
//   std::unique_ptr<OneNodePieces> p = OneNodePieces::Create(comm, map);
//   if (p != nullptr) RETURN_IF_ERROR(p->ReduceToOwner(grads, lo, hi, shard_out, &bytes));
//
// Create returns null when `comm` is not a ShmCommunicator or has one rank
// (callers keep their ring routes). Thread-compatible: one thread at a time
// (the strategy's communication thread); the communicator is borrowed.
// Failure: the communicator's error, naming the range.
#ifndef TANDEM_COMMON_SYNC_ZERO_ONE_NODE_PIECES_H_
#define TANDEM_COMMON_SYNC_ZERO_ONE_NODE_PIECES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/comm/communicator.h"
#include "common/comm/shm/shm_communicator.h"
#include "common/shard/zero_shard_map.h"

namespace tandem {
namespace sync {

class OneNodePieces {
 public:
  // True when Create would return an instance.
  static bool Usable(const Communicator* comm);
  static std::unique_ptr<OneNodePieces> Create(Communicator* comm, const shard::ZeroShardMap& map);

  // This rank's piece of the sum over ranks of grads[lo, hi) into `out`
  // (map.piece(rank, lo, hi).size() floats; may be grads + piece.lo).
  // *bytes += the floats this rank staged for the others, in bytes.
  absl::Status ReduceToOwner(const float* grads, int64_t lo, int64_t hi, float* out,
                             int64_t* bytes);
  // params[lo, hi) on every rank from the owners of its pieces, in place.
  // *bytes += this rank's piece, in bytes.
  absl::Status Gather(float* params, int64_t lo, int64_t hi, int64_t* bytes);

 private:
  OneNodePieces(ShmCommunicator* shm, const shard::ZeroShardMap& map);
  // bounds_[j] = rank j's piece start in [lo, hi); bounds_[N] = hi.
  void SetBounds(int64_t lo, int64_t hi);

  ShmCommunicator* const shm_;
  const shard::ZeroShardMap map_;
  const int rank_;
  std::vector<int64_t> bounds_;  // world + 1, sized once
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ZERO_ONE_NODE_PIECES_H_
