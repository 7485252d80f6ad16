// GradClip: the clip factor of one step, identical on every rank. A strategy
// gives it the sum of squares of the gradients it holds over the part it
// owns (the whole vector for allreduce, a shard for ZeRO) and the scale
// those gradients will be multiplied by (grad_scale / world_size); with a
// `shards` communicator the local sums are first combined across the ranks
// owning disjoint shards. The result is optim::ComputeClip of
//
//   total_sum_sq * scale * scale,  total_sum_sq = sum over shards (rank order)
//
// so the allreduce strategy's factor is bit for bit what it was before the
// split, and every rank multiplies `scale` by the same float.
//
//   ASSIGN_OR_RETURN(GradClip clip, GradClip::Create({max_grad_norm, nullptr}));
//   double scale = grad_scale / world;
//   if (clip.enabled()) {
//     ASSIGN_OR_RETURN(optim::ClipResult c,
//                      clip.Compute(optim::PartialSumOfSquares(owned_grads), scale));
//     scale *= c.scale;
//   }
//
// Combining across shards is an AllGather of two doubles per rank (the sum
// and a tag; exact and order-fixed, unlike a float allreduce) into a buffer
// sized once in Create, so Compute and Combine allocate nothing; it is collective over `shards` and
// needs a host-memory communicator (Gloo, shm).
// Thread-compatible: one thread (the trainer's) calls Compute. Failure:
// Create: InvalidArgument for a negative or non-finite max_grad_norm.
// Compute: the communicator's error, or ComputeClip's FailedPrecondition for
// a non-finite norm.
#ifndef TANDEM_COMMON_SYNC_GRAD_CLIP_H_
#define TANDEM_COMMON_SYNC_GRAD_CLIP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/communicator.h"
#include "common/optim/clip.h"

namespace tandem {
namespace sync {

struct GradClipOptions {
  double max_grad_norm = 0;        // global L2 norm limit; 0 = off
  Communicator* shards = nullptr;  // borrowed; null: this rank owns everything
};

class GradClip {
 public:
  static absl::StatusOr<GradClip> Create(GradClipOptions options);

  // False when max_grad_norm is 0: Compute need not be called (and does not
  // communicate).
  bool enabled() const { return max_grad_norm_ > 0; }

  // `local_sum_sq`: sum of g[i]^2 over this rank's owned gradients as held;
  // `scale`: what they will be multiplied by. Returns the global norm of the
  // scaled gradients and the factor to multiply `scale` by (1 when not
  // clipped). Disabled: {0, 1, false} at once, nothing computed.
  absl::StatusOr<optim::ClipResult> Compute(double local_sum_sq, double scale);

  // The shards' combination alone, whether or not clipping is enabled:
  // the sum of every shard's `local_sum_sq` (rank order) and the largest
  // `tag` (grad_check.h passes the index of a range with non-finite
  // gradients, -1 for none). Collective over `shards` when there is more
  // than one; otherwise returns its inputs.
  struct Totals {
    double sum_sq = 0;
    double max_tag = -1;
  };
  absl::StatusOr<Totals> Combine(double local_sum_sq, double tag);

  // ComputeClip of the combined `total_sum_sq` scaled by `scale` ({0, 1,
  // false} when disabled); no communication.
  absl::StatusOr<optim::ClipResult> ClipFromTotal(double total_sum_sq, double scale) const;

 private:
  GradClip(double max_grad_norm, Communicator* shards);

  double max_grad_norm_;
  Communicator* shards_;
  std::vector<double> gathered_;  // two per shard rank
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_GRAD_CLIP_H_
