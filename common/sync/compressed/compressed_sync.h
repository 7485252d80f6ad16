// CompressedSync: the `compressed` GradientSync strategy. Gradients are
// compressed by a codec (codec.h: int8, fp16, bf16, topk, threshold) and
// summed bucket by bucket while backward is still running (the BucketEngine,
// as `allreduce`), then averaged, clipped and stepped over the whole vector
// on every rank, as `allreduce` does.
//
//   CompressedSyncOptions o;                  // like AllreduceSyncOptions, plus
//   o.codec.codec = "int8";  o.error_feedback = true;  o.warmup_steps = 100;
//   ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> s, CreateCompressedSync(std::move(o)));
//
// Summation never re-quantizes hop by hop (int8 cannot be summed along a
// ring). A bucket of n values, W ranks, S = ceil(n / W), slice j =
// [j S, min(n, (j + 1) S)) (empty slices allowed):
//   dense codecs: every rank encodes each slice j (its gradient plus its
//     residual, error feedback) into block j; an all-to-all gives rank r
//     every rank's block r; rank r decodes and sums them in fp32 in rank
//     order, encodes that sum (with its own residual for the sum), and an
//     allgather of the encoded sums gives every rank every slice, decoded
//     into the gradient buffer. Blocks are MaxEncodedBytes(S) rounded up
//     to 8 bytes.
//   sparse codecs (topk, threshold): every rank encodes the whole bucket;
//     an allgather of the blocks, each padded to MaxEncodedBytes(n); every
//     rank decodes and adds them in rank order into the zeroed bucket.
//   hierarchical (hier=1, dense codecs, every node with the same number L
//     of ranks; otherwise the flat exchange, said in rank 0's log): the
//     bucket is first reduce-scattered in fp32 inside the node (shared
//     memory; padded to L shares of ceil(n / L)), the dense exchange above
//     runs on this local rank's share over CommGroups::inter (the ranks of
//     the same local index on every node), and the shares are allgathered
//     inside the node: a node sends about 1/L of the flat exchange's bytes
//     across nodes (2 (G - 1) / G compressed shares of n / L for G nodes).
// Either way every rank decodes the same bytes in the same order, so the
// gradients are identical on every rank. The first warmup_steps steps,
// and every bucket smaller than min_bucket_kb KiB, are sent uncompressed
// (a plain allreduce; counted in stats().uncompressed_buckets).
// Stochastic rounding seeds from CompressedSeed(step, bucket, rank, slice,
// stage): reproducible, and the same after a resume.
//
// State (extra_state(), checkpointed by name): "compressed/meta" (world
// size, sizes, steps done) and "compressed/residuals": every rank's
// residuals (gradient, sum, thresholds), gathered onto rank 0 by
// SyncStateToHost and sent back to each rank by StateLoaded, since the
// checkpoint keeps rank 0's extra state only. Both calls are therefore
// collective over the world communicator: every rank calls them together,
// between steps (the worker's checkpointer does). Rank 0 holds W times the
// residuals for this, allocated the first time extra_state() or these calls
// need it; other ranks' "compressed/residuals" is empty. At
// another world size (or bucket plan) the residuals reset to zero, with a
// log line on rank 0. With momentum_correction, also "compressed/velocity":
// a 2-float tag then every rank's velocity (rank 0 holds world x size), by
// the same gather and send-back; a checkpoint without it (written without
// momentum_correction, or at another world size, so the blob does not fit)
// starts the velocity from zero, with a log line on rank 0, while the
// residuals load on their own terms. Nothing is allocated per step; host
// memory only.
//
// Thread-safety, ownership and failure: as AllreduceSync (allreduce_sync.h);
// CreateCompressedSync returns InvalidArgument for bad options (naming the
// key) and for device memory (make_device_stepper that builds a stepper).
#ifndef TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_SYNC_H_
#define TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_SYNC_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/codec/codec_factory.h"
#include "common/comm/communicator.h"
#include "common/comm/groups.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

struct CompressedSyncOptions {
  Communicator* comm = nullptr;  // borrowed; host buffers (Gloo)
  float* params = nullptr;       // flat parameters [0, size)
  float* grads = nullptr;        // flat gradients, same layout
  int64_t size = 0;
  // The ranges backward reports, in backward order (nn::GroupRanges).
  std::vector<std::pair<int64_t, int64_t>> ready_ranges;
  double bucket_cap_mb = 25;                    // MiB of fp32 gradients per bucket, > 0
  std::unique_ptr<optim::Optimizer> optimizer;  // over [0, size)
  double max_grad_norm = 0;                     // 0 = no clipping
  // Optional: builds a device finish; refused if it builds one (host only).
  optim::DeviceStepperFactory make_device_stepper;
  // Borrowed, optional: `world` must be `comm`; gives the node layout for
  // stats().inter_node_bytes (without it the world is assumed to span nodes).
  const CommGroups* groups = nullptr;

  codec::CodecConfig codec;
  bool error_feedback = true;  // residuals carried to the next step
  int64_t warmup_steps = 0;    // first steps uncompressed, >= 0
  double min_bucket_kb = 0;    // smaller buckets uncompressed, >= 0
  // Dense codecs: the hierarchical exchange (see above); needs `groups`
  // built with node groups.
  bool hierarchical = false;
  // Momentum correction with momentum factor masking (Deep Gradient
  // Compression, Lin et al. ICLR'18; error_feedback.h): sparse codecs with
  // error_feedback only. Each rank keeps a velocity u per flat offset,
  // u <- momentum u + g, adds u (not g) to its residual, and zeroes u where
  // a value was sent; the averaged sum of what was sent is applied by the
  // optimizer, which must then be plain SGD (sgd without momentum state:
  // the momentum is applied here, not twice). Values sent uncompressed
  // (warmup_steps, buckets below min_bucket_kb) send u itself and are not
  // masked: exactly momentum SGD for them, and u carries on across the
  // end of the warm-up.
  bool momentum_correction = false;
  float momentum = 0;  // in [0, 1)
  // false: momentum correction without factor masking (u of sent values
  // kept; a coordinate sent every step then moves exactly as momentum SGD).
  bool momentum_masking = true;
};

absl::StatusOr<std::unique_ptr<GradientSync>> CreateCompressedSync(CompressedSyncOptions options);

// The stochastic-rounding seed of one encode: `stage` 0 for a rank's own
// slices, 1 for its encoded sum.
uint64_t CompressedSeed(int64_t step, int bucket, int rank, int slice, int stage);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_COMPRESSED_COMPRESSED_SYNC_H_
