// GradientSync: how one optimizer step's gradients, computed locally on every
// rank, become the same parameter update on every rank. The trainer talks
// only to this interface; strategies plug in behind it through the registry
// (common/sync/registry.h): `allreduce` (DDP buckets) today, `zero1..3`,
// `compressed`, `ps`, `hybrid` as they land. Adding a strategy means adding
// files and one registration, never editing the trainer.
//
// One optimizer step, with k micro-batches of gradient accumulation:
//
//   RETURN_IF_ERROR(sync->BeforeForward());     // ZeRO-3 gathers, ps pulls
//   for (int m = 0; m < k; ++m) {
//     model->Forward(micro_batch[m]);
//     if (m + 1 < k) {                        // no communication on micro-steps
//       model->Backward(m == 0 ? 0.f : 1.f, nullptr);
//     } else {
//       RETURN_IF_ERROR(sync->BeginStep(StepOptions{.grad_scale = 1.f / k}));
//       model->Backward(m == 0 ? 0.f : 1.f,
//                       [&](const nn::GradRange& r) { sync->OnGradientsReady(r.lo, r.hi); });
//     }
//   }
//   RETURN_IF_ERROR(sync->FinishStep(ctx));   // parameters updated on every rank
//
// OnGradientsReady is called from the backward thread, in backward order,
// once per range, and the ranges tile [0, n) exactly once per step; it must
// return quickly (it only hands work to the strategy's communication thread
// or stream) so communication overlaps the rest of backward. FinishStep is
// the step finisher: it waits for all communication, applies
// grad_scale / world_size (averaging), clipping and the optimizer over
// owned_range() (the whole vector for allreduce, a 1/N shard plus an
// allgather for ZeRO, nothing for ps), and leaves identical parameters on
// every rank.
//
// State: besides the parameters, a strategy may hold state that must travel
// with checkpoints: the optimizer's state over owned_range() (optimizer())
// and extra named buffers (error-feedback residuals, ...: extra_state()).
// Before a checkpoint is written the trainer calls SyncStateToHost() (device
// state -> the host buffers those accessors expose); after it has filled
// them from a checkpoint or a broadcast it calls StateLoaded().
//
// Not thread-safe beyond the above: every call but OnGradientsReady from the
// trainer thread; OnGradientsReady from the backward thread between
// BeginStep and FinishStep. Errors (a failed or timed-out collective) are
// returned by FinishStep / BeforeForward, naming the operation and rank;
// after an error the object must be destroyed (the generation is over) — it
// never hangs and never applies a partial update, except where
// partially_updated() says so.
#ifndef TANDEM_COMMON_SYNC_GRADIENT_SYNC_H_
#define TANDEM_COMMON_SYNC_GRADIENT_SYNC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/optim/optimizer.h"
#include "common/tensor/param_hook.h"

namespace tandem {
namespace sync {

// One parameter's place and shape in the flat vector (from the model's
// ParameterLayout): what a strategy that treats weights as matrices
// (compressed codec=powersgd) needs beyond the flat ranges.
struct ParamShape {
  int64_t offset = 0;          // first element in the flat vector
  std::vector<int64_t> shape;  // e.g. {1024, 784}; the size is the product
};

struct StepOptions {
  // Multiplies the summed gradients before the update, together with the
  // 1/world_size average: 1/k for k accumulated micro-batches, times
  // 1/loss_scale for fp16.
  float grad_scale = 1.0f;
  // Check the summed gradients this rank holds for inf / NaN, agree across
  // ranks, and skip the update when any rank found one: parameters and
  // optimizer state are left untouched on every rank, last_step().applied
  // is false and names the first group (forward order) that had them.
  // Strategies that step elsewhere (ps, hybrid) reject it in BeginStep.
  bool skip_non_finite = false;
  // Compute last_step().grad_sum_sq (implied by skip_non_finite and by
  // clipping, which need the same pass).
  bool measure_grad_norm = false;
  // This step's optimizer context, when the trainer knows it before
  // backward (FinishStep must then be given the same one). It lets the
  // allreduce strategy step each bucket as soon as its allreduce completes
  // (allreduce_sync.h); strategies that step in FinishStep ignore it.
  std::optional<optim::StepContext> context;
};

// What the last FinishStep did (trainer thread; valid until the next
// BeginStep).
struct StepReport {
  bool applied = true;  // false: skipped for non-finite gradients
  // Sum over the whole flat vector of the squared summed gradients (the
  // sum over ranks, before grad_scale / world_size), identical on every
  // rank; negative when not computed this step.
  double grad_sum_sq = -1;
  // When skipped: the ready range (an index into SyncEnv::ready_ranges)
  // nearest the model's input whose summed gradients were non-finite, i.e.
  // the first layer in forward order that produced them; -1 otherwise.
  int first_non_finite_range = -1;
};

// Counters a strategy keeps for metrics and benchmarks (cumulative).
struct SyncStats {
  int64_t steps = 0;
  int64_t buckets = 0;              // collectives launched
  int64_t bytes_sent = 0;           // payload handed to the communicator(s)
  // Of that, the payload handed to collectives whose group spans more than
  // one node (what crosses the network between machines).
  int64_t inter_node_bytes = 0;
  double comm_seconds = 0;          // time the communication thread was busy
  double exposed_wait_seconds = 0;  // time FinishStep waited for communication
  double optimizer_seconds = 0;     // time FinishStep spent clipping and stepping
  // Gradient compression (the `compressed` strategy; 0 for the others):
  // fp32 bytes given to codecs and the encoded bytes they became (the
  // compression ratio is before / after), buckets sent uncompressed
  // (warm-up, small buckets), and the L2 norm of this rank's
  // error-feedback residuals after the last compressed step (a gauge).
  int64_t compress_bytes_before = 0;
  int64_t compress_bytes_after = 0;
  int64_t uncompressed_buckets = 0;
  double residual_norm = 0;
};

// Bytes this rank holds for the model, by kind (ZeRO's accounting; metrics).
struct SyncMemory {
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;      // gradients the strategy keeps reduced
  int64_t optimizer_bytes = 0;
  int64_t staging_bytes = 0;   // communication buffers
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // The registry name: "allreduce", "zero1", ...
  virtual std::string name() const = 0;

  // The range of the flat parameter vector this rank's optimizer steps:
  // [0, n) for allreduce, this rank's 1/N for ZeRO. ps and hybrid step on
  // shard servers and return [0, n) with optimizer() null: what this rank
  // holds and checkpoints write.
  virtual optim::ParamRange owned_range() const = 0;

  // Called before the first forward of every optimizer step (ZeRO-3
  // gathers parameters, ps pulls them). Default: nothing to do.
  virtual absl::Status BeforeForward() { return absl::OkStatus(); }

  // Strategies that shard the parameters themselves (zero3) return the
  // hook the trainer installs on the model (Model::set_param_hook) for the
  // life of this object, so each layer's parameters are gathered just
  // before use. Default: none (every rank holds every parameter).
  virtual tensor::ParamHook* param_hook() { return nullptr; }

  // Starts a synchronised step: the next backward's ranges will be reported.
  virtual absl::Status BeginStep(const StepOptions& options) = 0;
  // [lo, hi) of the flat gradient vector is final for this step.
  virtual void OnGradientsReady(int64_t lo, int64_t hi) = 0;
  // Waits for communication and applies the optimizer; see the file comment.
  virtual absl::Status FinishStep(const optim::StepContext& context) = 0;

  // The optimizer over owned_range() (its state() is checkpointed), or
  // nullptr when this rank steps nothing. Owned by the strategy.
  virtual optim::Optimizer* optimizer() = 0;
  // Strategy state other than the optimizer's, saved and loaded with
  // checkpoints by name (host memory, owned by the strategy). Default: none.
  virtual std::vector<optim::StateBuffer> extra_state() { return {}; }
  // Device-resident state -> the host buffers above (before a checkpoint or
  // a host-side broadcast). Default: state already lives on the host.
  virtual absl::Status SyncStateToHost() { return absl::OkStatus(); }
  // The host buffers were overwritten (restore): push them to the device.
  virtual absl::Status StateLoaded() { return absl::OkStatus(); }

  // True after a failed step that had already updated part of the
  // parameters (the allreduce strategy's per-bucket step): this rank's
  // parameters and optimizer state then belong to no step, so recovery
  // must not keep them (MemoryState::Retain). Default: never.
  virtual bool partially_updated() const { return false; }

  // The last FinishStep's outcome. Default: applied, nothing measured
  // (strategies that cannot skip reject skip_non_finite in BeginStep).
  virtual StepReport last_step() const { return {}; }

  virtual SyncStats stats() const = 0;
  // What this rank holds (cheap; called once per step for metrics).
  virtual SyncMemory memory() const = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_GRADIENT_SYNC_H_
