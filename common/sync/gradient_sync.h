// GradientSync: how one optimizer step's gradients, computed locally on every
// rank, become the same parameter update on every rank. The trainer talks
// only to this interface; strategies (DESIGN.md "Gradient sync strategies")
// plug in behind it: `allreduce` (DDP buckets, the first implementation),
// later `compressed`, `zero1..3`, `ps`, `hybrid`.
//
// One optimizer step, with k micro-batches of gradient accumulation:
//
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
// or stream) so communication overlaps the rest of backward. FinishStep waits
// for all communication, applies grad_scale / world_size (averaging) and the
// optimizer (the strategy owns who steps what: the whole vector for
// allreduce, a 1/N shard plus an allgather for ZeRO), and leaves identical
// parameters on every rank.
//
// Not thread-safe beyond the above: BeginStep / FinishStep from the trainer
// thread; OnGradientsReady from the backward thread between them. Errors
// (a failed or timed-out collective) are returned by FinishStep, naming the
// operation and rank; after an error the object must be destroyed (the
// generation is over) — it never hangs and never applies a partial update.
#ifndef TANDEM_COMMON_SYNC_GRADIENT_SYNC_H_
#define TANDEM_COMMON_SYNC_GRADIENT_SYNC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/optim/optimizer.h"

namespace tandem {
namespace sync {

struct StepOptions {
  // Multiplies the summed gradients before the update, together with the
  // 1/world_size average: 1/k for k accumulated micro-batches, times
  // 1/loss_scale for fp16.
  float grad_scale = 1.0f;
};

// Counters a strategy keeps for metrics and benchmarks (cumulative).
struct SyncStats {
  int64_t steps = 0;
  int64_t buckets = 0;            // collectives launched
  int64_t bytes_sent = 0;         // payload handed to the communicator
  double comm_seconds = 0;        // time the communication thread was busy
  double exposed_wait_seconds = 0;  // time FinishStep waited for communication
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // "allreduce", "zero1", ...
  virtual std::string name() const = 0;

  // Starts a synchronised step: the next backward's ranges will be reported.
  virtual absl::Status BeginStep(const StepOptions& options) = 0;
  // [lo, hi) of the flat gradient vector is final for this step.
  virtual void OnGradientsReady(int64_t lo, int64_t hi) = 0;
  // Waits for communication and applies the optimizer; see the file comment.
  virtual absl::Status FinishStep(const optim::StepContext& context) = 0;

  virtual SyncStats stats() const = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_GRADIENT_SYNC_H_
