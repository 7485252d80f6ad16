// LayerGather: a range of the flat parameter vector (one layer, for zero3)
// brought from the ranks that own its pieces (ZeroShardMap) to
// every rank, in place, by whichever of three collectives puts the fewest
// bytes on the busiest link (N ranks, the range's G floats, B = its largest
// owned piece, M nodes):
//
//   allgather  every rank's piece packed into a block of B floats (zeros
//              past its piece) and one ring allgather of the blocks, then
//              unpacked: (N - 1) * B floats per link. Best when the range
//              spreads over the shards (a group of layers, the whole vector).
//   allreduce  every rank but the owners zeroes its copy of the range and
//              one ring allreduce sums in place: x + 0 = x exactly, so every
//              rank ends with the owners' values bit for bit; 2 (N - 1) / N
//              * G floats per link, no staging. Best when one or two ranks
//              own the range (a layer inside one shard).
//   two-level  nodes of equal size only (L ranks each): the packed blocks
//              by TwoLevelAllGather, once to the same local rank of every
//              other node and then through shm inside, two collectives:
//              L (M - 1) * B floats on each node link. Best for a range
//              spread over the shards (a group) at nodes of several ranks.
//   broadcast  nodes of equal size only (two levels, PieceBroadcast): each
//              owner's piece once to every other node, then shm inside:
//              (M - 1) * G floats on the owner's node link. Best at few
//              nodes of several ranks for a range one or two ranks own.
//
// None of them sends a piece over a network link once per remote rank (a
// flat one-to-all broadcast), at any layout with several nodes: one worker
// per node, unequal nodes. On one node (no network link, the world over
// shm) the pieces route: OneNodePieces' gather, every owner's piece copied
// where it lies through the segment, one collective per range. The choice depends only on the map, the range and the layout,
// so every rank makes the same one.
//
//   LayerGather g(world, groups, map, units, max_staging);  // staging for `units`
//   RETURN_IF_ERROR(g.Run(params, lo, hi, &bytes));
//
// Staging (allgather blocks) is sized once for the largest of `units`, at
// most max_staging floats (0 = no cap): a range whose packed blocks are
// larger goes in rounds, each one ring allgather of the next part of every
// piece (same bytes, more hand-offs).
// Thread-compatible: one thread at a time (the strategy's gather thread).
// Failure: the collective's error, naming the range and the route.
#ifndef TANDEM_COMMON_SYNC_ZERO_LAYER_GATHER_H_
#define TANDEM_COMMON_SYNC_ZERO_LAYER_GATHER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/comm/communicator.h"
#include "common/comm/groups.h"
#include "common/shard/zero_shard_map.h"
#include "common/sync/zero/one_node_pieces.h"
#include "common/sync/zero/two_level_allgather.h"
#include "common/sync/zero/zero_parts.h"

namespace tandem {
namespace sync {

enum class GatherRoute { kAllGather, kAllReduce, kBroadcast, kTwoLevel, kPieces };
const char* GatherRouteName(GatherRoute r);

// The rule every ZeRO parameter gather picks its collective by: the route
// with the fewest floats on the busiest link. A cost < 0 means the route
// cannot run there. Ties go to the allgather, then the two-level
// allgather, then the allreduce; at least one cost must be >= 0.
struct GatherLinkCosts {
  double allgather = -1;
  double allreduce = -1;
  double broadcast = -1;
  double two_level = -1;
};
GatherRoute CheapestGatherRoute(const GatherLinkCosts& costs);

// zero1/zero2's gather rounds (zero_sync.h: C floats of every one of the N
// shards per round) among `nodes` nodes: one flat ring allgather puts
// (N - 1) C on every link; with `two_level` (TwoLevelAllGather over nodes of
// equal size L = N / nodes) each rank's C floats go once to every other
// node and then through shm, (nodes - 1) L C on each node's link. So the
// two levels (kTwoLevel) win at equal nodes of several ranks; one rank per
// node, unequal nodes and one node keep the ring. Allreduce has no part
// (the round's floats are not one contiguous range).
GatherRoute RoundGatherRoute(int world, int nodes, bool two_level);

class LayerGather {
 public:
  // `groups` may be null (flat over `world`). `units`: the ranges Run will
  // mostly be called with (for the staging size).
  LayerGather(Communicator* world, const CommGroups* groups, const shard::ZeroShardMap& map,
              const std::vector<std::pair<int64_t, int64_t>>& units,
              int64_t max_staging_floats = 0);

  GatherRoute RouteFor(int64_t lo, int64_t hi) const;

  // params[lo, hi) from its owners on every rank; *bytes += what this rank
  // sent.
  absl::Status Run(float* params, int64_t lo, int64_t hi, int64_t* bytes);

  int64_t staging_floats() const { return static_cast<int64_t>(blocks_.size()); }

 private:
  // The packed allgather in rounds: over the world's ring, or with
  // `two_level` by TwoLevelAllGather.
  absl::Status AllGather(float* params, int64_t lo, int64_t hi, bool two_level, int64_t* bytes);
  absl::Status AllReduce(float* params, int64_t lo, int64_t hi, int64_t* bytes);

  Communicator* const world_;
  const shard::ZeroShardMap map_;
  const int rank_;
  const int world_size_;
  PieceBroadcast broadcast_;  // two levels when the nodes are equal
  TwoLevelAllGather two_level_;  // usable when the nodes are equal
  int nodes_ = 1;
  bool single_node_ = false;  // groups say every rank is on one node
  std::vector<float> blocks_;  // world * the largest packed block
  std::unique_ptr<OneNodePieces> pieces_;  // the world over shm; else null
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ZERO_LAYER_GATHER_H_
