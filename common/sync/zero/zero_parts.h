// What the ZeRO strategies share (zero_sync.h: zero1/zero2,
// zero3_sync.h: zero3), so each holds only what makes it its stage:
//
//   MakeZeroParts   the checks every one of them makes at creation (a
//                   communicator, the model's buffers, an optimizer over
//                   exactly the owned range, host memory only) and the
//                   optimizer and clip it builds from them; with
//                   allow_device (zero1/zero2) a device stepper too.
//   OwnerReduce     a gradient bucket reduced to the ranks owning its
//                   pieces: packed into N equal blocks and reduce-scattered,
//                   or (when a bucket sits mostly in one shard, where the
//                   packing would send up to N times the bucket) allreduced
//                   in place, whichever moves fewer bytes; routes and
//                   staging sized once from the bucket plan. On one node
//                   over shm: one reduce-scatter of the bucket's pieces
//                   where they lie (one_node_pieces.h).
//   PieceBroadcast  each owner of a piece of a parameter range sends it to
//                   every rank, in place (a layer gathered for its forward):
//                   over the world, or in two levels across nodes.
// and the sharded step they all end with, StepOwnedShard, is the
// framework's (common/sync/step_owned_shard.h: allreduce and compressed end
// with it too, over the whole vector).
//
// Thread-compatible: an OwnerReduce is used by one thread at a time (the
// strategy's communication thread); the functions hold no state.
#ifndef TANDEM_COMMON_SYNC_ZERO_ZERO_PARTS_H_
#define TANDEM_COMMON_SYNC_ZERO_ZERO_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/comm/communicator.h"
#include "common/comm/groups.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"
#include "common/shard/zero_shard_map.h"
#include "common/sync/bucket/bucket_plan.h"
#include "common/sync/grad_clip.h"
#include "common/sync/gradient_sync.h"
#include "common/sync/step_owned_shard.h"
#include "common/sync/zero/one_node_pieces.h"

namespace tandem {
namespace sync {

struct ZeroPartsOptions {
  std::string label;  // "zero2 sync", for messages
  Communicator* comm = nullptr;
  int64_t size = 0;
  const float* params = nullptr;
  const float* grads = nullptr;
  double max_grad_norm = 0;
  std::function<absl::StatusOr<std::unique_ptr<optim::Optimizer>>(optim::ParamRange)>
      make_optimizer;
  optim::DeviceStepperFactory make_device_stepper;
  // zero1 / zero2: a stepper the factory builds is kept (device memory);
  // false (zero3): it is UNIMPLEMENTED.
  bool allow_device = false;
  // Device memory only: a host-memory communicator over the same ranks
  // (the worker's control mesh) that combines the shards' gradient norms;
  // required with clipping on and more than one rank.
  Communicator* host_comm = nullptr;
};

struct ZeroParts {
  std::unique_ptr<optim::Optimizer> optimizer;  // over map.owned(rank)
  // Device memory: the stepper over `optimizer` (owned range); else null.
  std::unique_ptr<optim::DeviceStepper> stepper;
  GradClip clip;  // combines over comm (host) or host_comm (device)
};

// INVALID_ARGUMENT naming the field for bad options or an optimizer over
// another range, or device memory with clipping and no host_comm; the
// factory's error; UNIMPLEMENTED for device memory without allow_device.
absl::StatusOr<ZeroParts> MakeZeroParts(const ZeroPartsOptions& options);

class OwnerReduce {
 public:
  // With `comm` a shared-memory world (OneNodePieces::Usable), every bucket
  // goes by OneNodePieces (no packing, no staging); otherwise by the routes
  // above. `comm` (may be null) is only inspected here.
  OwnerReduce(const shard::ZeroShardMap& map, int rank, const std::vector<Bucket>& buckets,
              Communicator* comm = nullptr);

  // Reduces grads[lo, hi) (bucket `bucket` of the plan) over `comm`; this
  // rank's piece of the sum lands at shard + (piece.lo - owned.lo), where
  // `shard` holds the owned range. *bytes += the bytes this rank sent.
  // The communicator's error as is (the caller names the bucket).
  absl::Status Run(Communicator& comm, float* grads, int bucket, int64_t lo, int64_t hi,
                   float* shard, int64_t* bytes);

  int64_t staging_floats() const { return static_cast<int64_t>(in_.size() + out_.size()); }

 private:
  struct Route {
    bool reduce_scatter = false;
    int64_t block = 0;  // floats per rank block (the largest piece) when reduce_scatter
  };
  const shard::ZeroShardMap map_;
  const int rank_;
  std::vector<Route> routes_;
  std::vector<float> in_;   // N blocks of the largest reduce-scattered piece
  std::vector<float> out_;  // one block
  std::unique_ptr<OneNodePieces> pieces_;  // shared-memory world; else null
};

// Flat: the owner broadcasts over the world, and Gloo's broadcast sends a
// copy to every other rank, so N - K copies cross node links. Two levels
// (node groups given, every node the same number of ranks): the owner's
// piece goes to the rank of the owner's local index on every node (inter
// group), then each node broadcasts it inside (intra, shm): M - 1 copies
// cross node links, as many bytes as a ring allgather moves.
// Device memory (zero1/zero2 on NCCL): every rank's updated owned slice
// into the full vector on every rank, in place. When N divides n (no
// padding) one allgather over the parameters themselves; otherwise each
// owner broadcasts its slice in place (N collectives) since an allgather
// needs N equal pieces and the last slices are short. Nothing allocated.
absl::Status GatherOwnedSlices(Communicator& comm, const shard::ZeroShardMap& map, float* params,
                               int64_t* bytes);

class PieceBroadcast {
 public:
  // `groups` may be null, or without intra/inter: flat over `world`.
  PieceBroadcast(Communicator* world, const CommGroups* groups);

  // Every owner j of a piece of params[lo, hi), in rank order; *bytes +=
  // the bytes this rank sent as the piece's owner. The failed broadcast's
  // error names the range and the owner.
  absl::Status Run(const shard::ZeroShardMap& map, float* params, int64_t lo, int64_t hi,
                   int64_t* bytes);

  bool two_level() const { return two_level_; }

 private:
  Communicator* world_;
  Communicator* intra_ = nullptr;
  Communicator* inter_ = nullptr;
  int local_rank_ = 0;
  std::vector<int> node_of_rank_, local_of_rank_;
  bool two_level_ = false;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ZERO_ZERO_PARTS_H_
