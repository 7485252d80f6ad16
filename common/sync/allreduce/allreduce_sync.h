// AllreduceSync: the `allreduce` GradientSync strategy (DDP). Gradients are
// summed across ranks bucket by bucket while backward is still running; once
// every bucket is summed, FinishStep averages, optionally clips, and steps
// the optimizer over the whole flat vector on every rank.
//
//   AllreduceSyncOptions o;
//   o.comm = comm.get();                      // GlooCommunicator for CPU
//   o.params = storage.params();  o.grads = storage.grads();  o.size = storage.size();
//   for (const nn::GradRange& r : nn::GroupRanges(model->layout()))
//     o.ready_ranges.push_back({r.lo, r.hi});
//   ASSIGN_OR_RETURN(o.optimizer, optim::Sgd::Create({0, o.size}, sgd_options));
//   ASSIGN_OR_RETURN(std::unique_ptr<GradientSync> sync, CreateAllreduceSync(std::move(o)));
//   // then the step protocol of gradient_sync.h
//
// The strategy is the BucketEngine (bucket_engine.h: buckets of whole
// ready ranges, about bucket_cap_mb each, issued in plan order on a
// communication thread while backward runs) with an in-place AllReduce as
// the per-bucket operation (no copies, no staging buffers), then GradClip
// (grad_clip.h) and the optimizer, or a DeviceStepper for device memory.
// With `hierarchical` (--sync_opt hier=1) the per-bucket operation is
// HierAllreduce (hier_allreduce.h: intra-node reduce-scatter, inter-node
// allreduce of a 1/L share, intra-node allgather), which sums in another
// order than the flat ring: results agree with flat within float rounding.
// Where the layout cannot use it exactly (one node, one rank per node, nodes
// of different sizes) or the gradients are device memory, the sync uses the
// flat ring for the whole generation and world rank 0 logs why.
// Non-finite check in the reduce: when the communicator fuses the sum of
// squares into its allreduce (Communicator::fuses_sum_of_squares: shm), the
// flat host path without clipping takes skip_non_finite's and
// measure_grad_norm's sum from the reduce pass (AllReduceSumOfSquares) and
// makes no pass of its own over the summed gradients; the skip decision and
// the update are the same (the sum may differ in the last bits from the
// one-pass sum, so clipping, which scales by it, keeps the one pass).
// Per-bucket step (step_per_bucket, on by default): when BeginStep is given
// the step's context (StepOptions::context) and the step needs nothing
// global before the update (no clipping, which needs the global norm first;
// no skip_non_finite or measure_grad_norm, which need every bucket summed;
// host memory; an optimizer with StepSlice), the communication thread steps
// each bucket's parameters right after its allreduce, while the bucket's
// gradients are still in cache and the later buckets are still in flight.
// The bits are those of the whole-vector step (the update is element-wise,
// with the same scale); FinishStep only waits, and checks that its context
// is the one BeginStep was given. Any other step takes the path above.
// Nothing is allocated per step. The registry builds it as "allreduce"
// (allreduce_strategy.cc).
//
// Thread-safety: see gradient_sync.h (trainer thread: BeginStep,
// FinishStep, stats; backward thread: OnGradientsReady). stats() may be
// called from any thread.
// Ownership: the communicator, params and grads are borrowed and must
// outlive this object; the communicator must not be used by anyone else
// while this object lives. The optimizer is owned; so is a device stepper
// built by make_device_stepper (a `device_stepper` is borrowed).
// Failure: CreateAllreduceSync returns InvalidArgument for bad options. A
// failed or timed-out collective, an unknown or repeated range, or a step
// whose ranges were not all reported makes FinishStep return an error (the
// collective's code, e.g. DEADLINE_EXCEEDED, with the bucket, the step and
// the communicator's message naming the operation and rank) without
// touching the parameters; later calls return FailedPrecondition: destroy
// the object. The communicator's timeout bounds every wait, so nothing hangs.
// The destructor may wait up to that timeout for an in-flight collective.
#ifndef TANDEM_COMMON_SYNC_ALLREDUCE_ALLREDUCE_SYNC_H_
#define TANDEM_COMMON_SYNC_ALLREDUCE_ALLREDUCE_SYNC_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/communicator.h"
#include "common/comm/groups.h"
#include "common/optim/device_stepper.h"
#include "common/optim/optimizer.h"
#include "common/sync/gradient_sync.h"

namespace tandem {
namespace sync {

struct AllreduceSyncOptions {
  Communicator* comm = nullptr;        // borrowed; host buffers for Gloo
  float* params = nullptr;             // flat parameters [0, size)
  float* grads = nullptr;              // flat gradients, same layout
  int64_t size = 0;
  // The ranges backward reports, in backward order (from
  // nn::GroupRanges(model->layout())): buckets are unions of whole
  // consecutive ranges, about bucket_cap_mb each.
  std::vector<std::pair<int64_t, int64_t>> ready_ranges;
  double bucket_cap_mb = 25;           // MiB of fp32 gradients per bucket, > 0
  std::unique_ptr<optim::Optimizer> optimizer;  // over [0, size)
  double max_grad_norm = 0;            // 0 = no clipping
  // Borrowed, optional (default nullptr: host loops and `optimizer`). When
  // set, params/grads are device memory and the stepper does the finish;
  // `optimizer` is still required (same range) but is not stepped: it is
  // the host mirror of the state for checkpoints (SyncStateToHost /
  // StateLoaded copy state between them).
  optim::DeviceStepper* device_stepper = nullptr;
  // Alternative to device_stepper (at most one of the two): called once in
  // CreateAllreduceSync with the owned optimizer; the sync owns the result.
  optim::DeviceStepperFactory make_device_stepper;
  // Borrowed, optional: this generation's groups, whose `world` must be
  // `comm`. Gives the node layout, for stats().inter_node_bytes (without
  // it the world is assumed to span nodes) and for `hierarchical`.
  const CommGroups* groups = nullptr;
  // Hierarchical allreduce per bucket (see above); needs `groups` built with
  // node_groups = true (intra and inter).
  bool hierarchical = false;
  // Step each bucket after its allreduce where the step allows it (see
  // above); false: always the whole vector in FinishStep.
  bool step_per_bucket = true;
};

absl::StatusOr<std::unique_ptr<GradientSync>> CreateAllreduceSync(AllreduceSyncOptions options);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ALLREDUCE_ALLREDUCE_SYNC_H_
