#include "common/sync/zero/layer_gather.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace sync {

const char* GatherRouteName(GatherRoute r) {
  switch (r) {
    case GatherRoute::kAllGather:
      return "allgather";
    case GatherRoute::kAllReduce:
      return "allreduce";
    case GatherRoute::kBroadcast:
      return "broadcast";
    case GatherRoute::kTwoLevel:
      return "two-level allgather";
    case GatherRoute::kPieces:
      return "shm pieces";
  }
  return "?";
}

GatherRoute CheapestGatherRoute(const GatherLinkCosts& c) {
  double best = c.allreduce;
  GatherRoute route = GatherRoute::kAllReduce;
  if (c.broadcast >= 0 && (best < 0 || c.broadcast < best)) {
    best = c.broadcast;
    route = GatherRoute::kBroadcast;
  }
  if (c.two_level >= 0 && (best < 0 || c.two_level <= best)) {
    best = c.two_level;
    route = GatherRoute::kTwoLevel;
  }
  if (c.allgather >= 0 && (best < 0 || c.allgather <= best)) route = GatherRoute::kAllGather;
  return route;
}

GatherRoute RoundGatherRoute(int world, int nodes, bool two_level) {
  GatherLinkCosts c;
  c.allgather = world - 1;  // per float of a shard's part of the round
  if (two_level && nodes > 0) c.two_level = static_cast<double>(nodes - 1) * (world / nodes);
  return CheapestGatherRoute(c);
}

namespace {

// The largest owned piece of [lo, hi).
int64_t LargestPiece(const shard::ZeroShardMap& map, int64_t lo, int64_t hi) {
  int64_t b = 0;
  if (hi <= lo) return 0;
  for (int j = map.owner(lo); j < map.world() && j <= map.owner(hi - 1); ++j) {
    b = std::max(b, map.piece(j, lo, hi).size());
  }
  return b;
}

}  // namespace

LayerGather::LayerGather(Communicator* world, const CommGroups* groups,
                         const shard::ZeroShardMap& map,
                         const std::vector<std::pair<int64_t, int64_t>>& units,
                         int64_t max_staging_floats)
    : world_(world),
      map_(map),
      rank_(world->rank()),
      world_size_(world->world_size()),
      broadcast_(world, groups),
      two_level_(groups, world->world_size()),
      pieces_(OneNodePieces::Create(world, map)) {
  if (groups != nullptr && groups->num_nodes > 0) nodes_ = groups->num_nodes;
  single_node_ = groups != nullptr && groups->num_nodes == 1 &&
                 static_cast<int>(groups->node_of_rank.size()) == world_size_;
  if (pieces_ != nullptr) return;  // no staging
  int64_t block = 0;
  for (const auto& [lo, hi] : units) {
    // Only blocks the route choice could pick need room: (N-1) B below the
    // allreduce's 2 (N-1) G / N means N B < 2 G.
    const int64_t b = LargestPiece(map_, lo, hi);
    const bool ring_wins = world_size_ * b < 2 * (hi - lo);
    const bool two_level_wins = two_level_.usable() && two_level_.local_size() * b < (hi - lo);
    if (ring_wins || two_level_wins) block = std::max(block, b);
  }
  // Larger pieces go in rounds of this many floats each.
  if (max_staging_floats > 0) {
    block = std::min(block, std::max<int64_t>(1, max_staging_floats / world_size_));
  }
  blocks_.assign(block * world_size_, 0.f);
}

GatherRoute LayerGather::RouteFor(int64_t lo, int64_t hi) const {
  // The world over shm (one node): every piece copied once per reader
  // where it lies, one collective. One node over another transport: no
  // network link to spare, and the owners' broadcasts copy once per reader.
  if (pieces_ != nullptr) return GatherRoute::kPieces;
  if (nodes_ == 1 && single_node_) return GatherRoute::kBroadcast;
  const double n = world_size_, g = static_cast<double>(hi - lo);
  const int64_t b = LargestPiece(map_, lo, hi);
  GatherLinkCosts c;
  c.allreduce = 2 * (n - 1) / n * g;
  // The owners' node link, when they sit on one node (a layer's usual case).
  if (broadcast_.two_level()) c.broadcast = (nodes_ - 1) * g;
  if (!blocks_.empty()) {
    c.allgather = (n - 1) * b;  // in rounds when b is above the staging
    if (two_level_.usable()) {
      c.two_level = static_cast<double>(two_level_.local_size()) * (nodes_ - 1) * b;
    }
  }
  return CheapestGatherRoute(c);
}

absl::Status LayerGather::Run(float* params, int64_t lo, int64_t hi, int64_t* bytes) {
  if (world_size_ == 1 || hi <= lo) return absl::OkStatus();
  const GatherRoute route = RouteFor(lo, hi);
  absl::Status s;
  switch (route) {
    case GatherRoute::kAllGather:
    case GatherRoute::kTwoLevel:
      s = AllGather(params, lo, hi, route == GatherRoute::kTwoLevel, bytes);
      break;
    case GatherRoute::kAllReduce:
      s = AllReduce(params, lo, hi, bytes);
      break;
    case GatherRoute::kBroadcast:
      return broadcast_.Run(map_, params, lo, hi, bytes);  // names the range itself
    case GatherRoute::kPieces:
      return pieces_->Gather(params, lo, hi, bytes);  // names the range itself
  }
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("parameter gather of [", lo, ", ", hi, ") by ",
                                             GatherRouteName(route), ": ", s.message()));
}

absl::Status LayerGather::AllGather(float* params, int64_t lo, int64_t hi, bool two_level,
                                    int64_t* bytes) {
  // Round by round: floats [off, off + c) of every rank's piece, each
  // padded with zeros to c, by one ring allgather into the staging blocks.
  const int64_t b = LargestPiece(map_, lo, hi);
  const int64_t round = static_cast<int64_t>(blocks_.size()) / world_size_;
  const optim::ParamRange p = map_.piece(rank_, lo, hi);
  for (int64_t off = 0; off < b; off += round) {
    const int64_t c = std::min(round, b - off);
    // Rank j's block: j in the ring's output, slot(j) in the two levels'.
    auto block = [&](int j) { return blocks_.data() + (two_level ? two_level_.slot(j) : j) * c; };
    float* mine = block(rank_);
    const int64_t have = std::clamp<int64_t>(p.size() - off, 0, c);
    if (have > 0) std::memcpy(mine, params + p.lo + off, have * sizeof(float));
    std::fill(mine + have, mine + c, 0.f);
    // In place: this rank's input is its own block of the output.
    absl::Status s = two_level
                         ? two_level_.Run(blocks_.data(), c)
                         : world_->AllGather(mine, blocks_.data(), c * int64_t{sizeof(float)});
    if (!s.ok()) return s;
    for (int j = 0; j < world_size_; ++j) {
      const optim::ParamRange q = map_.piece(j, lo, hi);
      const int64_t got = std::clamp<int64_t>(q.size() - off, 0, c);
      if (j == rank_ || got == 0) continue;
      std::memcpy(params + q.lo + off, block(j), got * sizeof(float));
    }
    *bytes += (world_size_ - 1) * c * int64_t{sizeof(float)};
  }
  return absl::OkStatus();
}

absl::Status LayerGather::AllReduce(float* params, int64_t lo, int64_t hi, int64_t* bytes) {
  // Keep only this rank's own piece; everyone else's part is summed in.
  const optim::ParamRange p = map_.piece(rank_, lo, hi);
  if (p.size() == 0) {
    std::fill(params + lo, params + hi, 0.f);
  } else {
    std::fill(params + lo, params + p.lo, 0.f);
    std::fill(params + p.hi, params + hi, 0.f);
  }
  absl::Status s = world_->AllReduce(params + lo, hi - lo, ReduceOp::kSum);
  if (!s.ok()) return s;
  *bytes += 2 * (world_size_ - 1) * (hi - lo) / world_size_ * int64_t{sizeof(float)};
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
