// TwoLevelAllGather: an allgather of equal blocks over the world in two
// collectives, at M nodes of L ranks each (equal nodes): every rank's block
// goes once to the rank of the same local index on every other node (one
// allgather over the inter group, Gloo across nodes), then every rank's M
// blocks go to the other ranks of its node (one allgather over the intra
// group, shared memory). (M - 1) L blocks cross each node's link, against
// the flat ring's N - 1, and it is two collectives where broadcasting each
// rank's block in two levels (PieceBroadcast) is 2N.
//
// Blocks land in slot order, not rank order: world rank j's block is block
// slot(j) = local(j) * M + node(j) of the output (the inter allgather fills
// this rank's node-ordered run of M blocks in place, the intra one
// concatenates the runs by local rank).
//
//   TwoLevelAllGather two(groups, world_size);
//   if (two.usable()) {
//     std::memcpy(out + two.slot(rank) * c, mine, c * sizeof(float));
//     RETURN_IF_ERROR(two.Run(out, c));   // block of rank j at out + two.slot(j) * c
//   }
//
// Thread-compatible: one thread at a time (the strategy's communication
// thread). The groups' communicators are borrowed and must outlive it.
// Failure: the failed level's error, naming it.
#ifndef TANDEM_COMMON_SYNC_ZERO_TWO_LEVEL_ALLGATHER_H_
#define TANDEM_COMMON_SYNC_ZERO_TWO_LEVEL_ALLGATHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/comm/communicator.h"
#include "common/comm/groups.h"

namespace tandem {
namespace sync {

// The local index of every world rank when `groups` has intra and inter
// communicators over `world_size` ranks on several nodes that all hold the
// same number of ranks (two levels can run); empty otherwise.
std::vector<int> EqualNodesLocalRanks(const CommGroups* groups, int world_size);

class TwoLevelAllGather {
 public:
  // Usable only with intra and inter groups, several nodes and every node
  // the same number of ranks; `groups` may be null (not usable).
  TwoLevelAllGather(const CommGroups* groups, int world_size);

  bool usable() const { return usable_; }
  int nodes() const { return nodes_; }
  int local_size() const { return local_size_; }

  // Where world rank j's block sits in the output (in blocks).
  int64_t slot(int rank) const {
    return int64_t{local_of_rank_[rank]} * nodes_ + node_of_rank_[rank];
  }

  // `out`: N blocks of `count` floats, this rank's own already at its slot.
  absl::Status Run(float* out, int64_t count);

 private:
  Communicator* intra_ = nullptr;
  Communicator* inter_ = nullptr;
  int nodes_ = 1;
  int local_size_ = 1;
  int node_index_ = 0;
  int local_rank_ = 0;
  std::vector<int> node_of_rank_, local_of_rank_;
  bool usable_ = false;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ZERO_TWO_LEVEL_ALLGATHER_H_
