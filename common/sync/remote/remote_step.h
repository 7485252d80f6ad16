// RemoteStep: what ps and hybrid share around one step against the shard
// servers — the step protocol (StepGuard), whether this step's learning
// rate is known at BeginStep (then pushes start during backward), the
// FinishStep preamble (a sane context, the servers initialised at the
// generation's first step, the expected step number, the pushed learning
// rate still right) and the push header.
//
//   absl::StatusOr<bool> early = step_.Begin(options);   // BeginStep
//   ...
//   RETURN_IF_ERROR(step_.CheckFinish());                 // FinishStep
//   if (absl::Status s = step_.Prepare(ctx); !s.ok()) return step_.Fail(s);
//   if (absl::Status s = step_.CheckPushedLr(ctx, early); !s.ok()) ...;
//   ... push, pull ...
//   step_.Done();
//
// Not thread-safe: the trainer thread (BeginStep / FinishStep / state
// calls); Header() may be called from the strategy's communication thread
// during a step (it reads only what Begin set). Borrowed pointers must
// outlive it. Errors name the strategy (`label`); Fail adds the rank and
// keeps the first error, after which every step call is FAILED_PRECONDITION.
#ifndef TANDEM_COMMON_SYNC_REMOTE_REMOTE_STEP_H_
#define TANDEM_COMMON_SYNC_REMOTE_REMOTE_STEP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/comm/communicator.h"
#include "common/optim/optimizer.h"
#include "common/shard/remote_shards.h"
#include "common/sync/gradient_sync.h"
#include "common/sync/remote/shard_server_state.h"
#include "common/sync/step_guard.h"

namespace tandem {
namespace sync {

struct RemoteStepOptions {
  std::string label;                            // "ps sync", "hybrid sync"
  int64_t generation = 0;
  Communicator* world = nullptr;                // borrowed
  ShardServerState* servers = nullptr;          // borrowed
  float* params = nullptr;                      // what rank 0 initialises them with
  std::function<float(int64_t)> learning_rate;  // SyncEnv's schedule; may be null
  int weight = 1;                               // ranks one push stands for
  int int8_chunk = 0;                           // int8 pushes: values per scale
};

class RemoteStep {
 public:
  explicit RemoteStep(RemoteStepOptions options) : o_(std::move(options)), guard_(o_.label) {}

  // BeginStep: the guard's checks and start. True when the step's learning
  // rate is known now (the servers are initialised and the schedule gives a
  // number): pushes may then carry it during backward (pushed_lr()).
  absl::StatusOr<bool> Begin(const StepOptions& options);
  absl::Status CheckFinish() { return guard_.CheckFinish(); }
  // A sane context (step >= 1, finite lr, no loss scaling), the servers
  // initialised at the generation's first step (rank 0 sends the
  // parameters every rank holds; a barrier), and the expected step.
  absl::Status Prepare(const optim::StepContext& ctx);
  // With pushes started early: the learning rate they carried is ctx's.
  absl::Status CheckPushedLr(const optim::StepContext& ctx) const;
  void Done() { ++next_step_; }
  // After a restore: the servers are initialised again at the next step.
  void Loaded() { initialised_ = false; }

  shard::PushHeader Header(int64_t step, float lr) const;
  // `s` with the strategy and rank in front, recorded (the first is kept).
  absl::Status Fail(absl::Status s);

  bool initialised() const { return initialised_; }
  int64_t next_step() const { return next_step_; }
  float pushed_lr() const { return pushed_lr_; }
  // BeginStep's StepOptions::grad_scale (what pushes carry in the header).
  float grad_scale() const { return guard_.grad_scale(); }
  bool ok() const { return guard_.ok(); }

 private:
  const RemoteStepOptions o_;
  StepGuard guard_;
  bool initialised_ = false;
  int64_t next_step_ = 0;
  float pushed_lr_ = 0;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_REMOTE_STEP_H_
