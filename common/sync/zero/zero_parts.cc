#include "common/sync/zero/zero_parts.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/optim/clip.h"
#include "common/status/status_macros.h"
#include "common/sync/grad_check.h"
#include "common/sync/zero/two_level_allgather.h"

namespace tandem {
namespace sync {

absl::StatusOr<ZeroParts> MakeZeroParts(const ZeroPartsOptions& o) {
  const std::string& label = o.label;
  if (o.comm == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": a communicator is required"));
  }
  if (o.size < 0) return absl::InvalidArgumentError(absl::StrCat(label, ": negative size ", o.size));
  if (o.size > 0 && (o.params == nullptr || o.grads == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": params and grads are required (the model's flat storage)"));
  }
  if (!o.make_optimizer) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": make_optimizer is required"));
  }
  const shard::ZeroShardMap map(o.size, o.comm->world_size());
  const optim::ParamRange owned = map.owned(o.comm->rank());
  absl::StatusOr<std::unique_ptr<optim::Optimizer>> opt = o.make_optimizer(owned);
  if (!opt.ok()) return opt.status();
  if (*opt == nullptr || (*opt)->range().lo != owned.lo || (*opt)->range().hi != owned.hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": make_optimizer must return an optimizer over the owned range [", owned.lo, ", ",
        owned.hi, ")"));
  }
  std::unique_ptr<optim::DeviceStepper> stepper;
  if (o.make_device_stepper) {
    absl::StatusOr<std::unique_ptr<optim::DeviceStepper>> s = o.make_device_stepper(opt->get());
    if (!s.ok()) return s.status();
    if (*s != nullptr && !o.allow_device) {
      return absl::UnimplementedError(absl::StrCat(
          label, ": device memory is not supported (it shards the parameters on host memory); "
                 "use --sync zero1, zero2 or allreduce on CUDA"));
    }
    stepper = std::move(*s);
  }
  Communicator* shards = o.comm;
  if (stepper != nullptr) {
    // The world communicator takes device pointers: the norms' doubles
    // travel over the host mesh.
    if (o.max_grad_norm > 0 && o.host_comm == nullptr && o.comm->world_size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": gradient clipping in device memory needs host_comm (a host-memory "
                 "communicator over the same ranks, e.g. the control mesh)"));
    }
    shards = o.host_comm;
  }
  absl::StatusOr<GradClip> clip = GradClip::Create({o.max_grad_norm, shards});
  if (!clip.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", clip.status().message()));
  }
  return ZeroParts{std::move(*opt), std::move(stepper), std::move(*clip)};
}

OwnerReduce::OwnerReduce(const shard::ZeroShardMap& map, int rank, const std::vector<Bucket>& buckets,
                         Communicator* comm)
    : map_(map), rank_(rank), pieces_(OneNodePieces::Create(comm, map)) {
  const int world = map.world();
  if (pieces_ != nullptr) return;  // no routes, no staging
  int64_t stage = 0, out = 0;
  for (const Bucket& b : buckets) {
    Route r;
    int64_t largest = 0;
    for (int j = 0; j < world; ++j) largest = std::max(largest, map.piece(j, b.lo, b.hi).size());
    r.reduce_scatter = world > 1 && largest * world <= 2 * b.size();
    r.block = largest;
    if (r.reduce_scatter) {
      stage = std::max(stage, largest * world);
      out = std::max(out, largest);
    }
    routes_.push_back(r);
  }
  in_.assign(stage, 0.f);
  out_.assign(out, 0.f);
}

absl::Status OwnerReduce::Run(Communicator& comm, float* grads, int bucket, int64_t lo,
                              int64_t hi, float* shard, int64_t* bytes) {
  const int world = map_.world();
  const optim::ParamRange mine = map_.piece(rank_, lo, hi);
  float* dst = shard + (mine.lo - map_.owned(rank_).lo);
  if (world == 1) {
    std::memcpy(dst, grads + mine.lo, mine.size() * sizeof(float));
    return absl::OkStatus();
  }
  if (pieces_ != nullptr) return pieces_->ReduceToOwner(grads, lo, hi, dst, bytes);
  const Route& route = routes_[bucket];
  if (route.reduce_scatter) {
    const int64_t m = route.block;
    for (int j = 0; j < world; ++j) {
      const optim::ParamRange p = map_.piece(j, lo, hi);
      float* block = in_.data() + j * m;
      std::memcpy(block, grads + p.lo, p.size() * sizeof(float));
      std::fill(block + p.size(), block + m, 0.f);
    }
    if (absl::Status s = comm.ReduceScatter(in_.data(), out_.data(), m); !s.ok()) return s;
    std::memcpy(dst, out_.data(), mine.size() * sizeof(float));
    *bytes += m * world * int64_t{sizeof(float)};
  } else {
    if (absl::Status s = comm.AllReduce(grads + lo, hi - lo, ReduceOp::kSum); !s.ok()) return s;
    std::memcpy(dst, grads + mine.lo, mine.size() * sizeof(float));
    *bytes += (hi - lo) * int64_t{sizeof(float)};
  }
  return absl::OkStatus();
}

absl::Status GatherOwnedSlices(Communicator& comm, const shard::ZeroShardMap& map, float* params,
                               int64_t* bytes) {
  const int world = map.world();
  if (world == 1 || map.size() == 0) return absl::OkStatus();
  const int rank = comm.rank();
  if (map.padded_size() == map.size()) {
    const int64_t s = map.shard_size();
    // In place: this rank's input is its own block of the output.
    RETURN_IF_ERROR(comm.AllGather(params + rank * s, params, s * int64_t{sizeof(float)}));
    *bytes += s * int64_t{sizeof(float)};
    return absl::OkStatus();
  }
  for (int j = 0; j < world; ++j) {
    const optim::ParamRange p = map.owned(j);
    if (p.size() == 0) continue;
    absl::Status s = comm.Broadcast(params + p.lo, p.size() * int64_t{sizeof(float)}, j);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("broadcast of rank ", j, "'s slice: ",
                                                 s.message()));
    }
    if (j == rank) *bytes += p.size() * int64_t{sizeof(float)};
  }
  return absl::OkStatus();
}

PieceBroadcast::PieceBroadcast(Communicator* world, const CommGroups* groups) : world_(world) {
  local_of_rank_ = EqualNodesLocalRanks(groups, world->world_size());
  if (local_of_rank_.empty()) return;
  intra_ = groups->intra.get();
  inter_ = groups->inter.get();
  local_rank_ = groups->local_rank;
  node_of_rank_ = groups->node_of_rank;
  two_level_ = true;
}

absl::Status PieceBroadcast::Run(const shard::ZeroShardMap& map, float* params, int64_t lo, int64_t hi,
                                 int64_t* bytes) {
  if (map.world() == 1 || hi <= lo) return absl::OkStatus();
  for (int j = map.owner(lo); j < map.world() && j <= map.owner(hi - 1); ++j) {
    const optim::ParamRange p = map.piece(j, lo, hi);
    if (p.size() == 0) continue;
    void* data = params + p.lo;
    const int64_t n = p.size() * int64_t{sizeof(float)};
    absl::Status s;
    if (!two_level_) {
      s = world_->Broadcast(data, n, j);
    } else {
      // Inter group k holds the k-th rank of every node, ordered by node.
      if (local_rank_ == local_of_rank_[j]) s = inter_->Broadcast(data, n, node_of_rank_[j]);
      if (s.ok()) s = intra_->Broadcast(data, n, local_of_rank_[j]);
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("parameter gather of [", lo, ", ", hi,
                                                 ") (rank ", j, "'s piece): ", s.message()));
    }
    if (j == world_->rank()) *bytes += n;
  }
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
