// Trainer: one worker process's control loop (docs/architecture.md "One
// training step", "Failure model"). The parts live in their own files:
// options (trainer_options.h), the dataset probe, the generation set-up
// (meshes + the --sync strategy from the registry), the checkpointer, the
// batch stager, the evaluator, the progress reporter and the worker metrics.
//
//   TrainerOptions o;
//   o.coordinator = "127.0.0.1:7000";  o.data_servers = {"127.0.0.1:7100"};
//   o.worker_id = "host:1234";  o.model = "mlp:784,256,10";
//   ASSIGN_OR_RETURN(auto trainer, Trainer::Create(o));
//   ASSIGN_OR_RETURN(TrainResult r, trainer->Run());
//
// Per generation: join -> SetUpGeneration -> the state from rank 0
// (Checkpointer::Restore) -> the data stream at the cursor's sample position
// (global batch = batch_size * world, or --batch auto / --batch_schedule's)
// -> steps of `accumulation` micro-batches each. After every step the ranks
// sum six floats over the control mesh — what the heartbeats said (STOP,
// REJOIN, coordinator lost), the loss, rank 0's wanted global batch and the
// pre-sync gradient norms (noise scale) — so they all act at the same step,
// rank 0 reports the mean loss over ranks, and a batch change happens on
// every rank at the same boundary (the stream restarted at the exact
// sample, the plan and LR recomputed, no new generation).
//
//  - every `checkpoint_every` steps and at the end rank 0 writes and commits
//    a checkpoint; at each epoch end every rank evaluates its slice;
//  - REJOIN or a membership error (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED,
//    CANCELLED: a peer died or hung, the generation ended under us): report
//    it, drop the generation, join again, reload the last committed
//    checkpoint. Any other error (a configuration problem, a bad file) ends
//    the run at once with its message;
//  - a heartbeat that says the generation ended by a failure (a lost rank)
//    aborts its communicators at once from the heartbeat thread
//    (AbortSwitch): the step in flight fails with ABORTED and the coordinator's
//    reason, instead of waiting out collective_timeout for a hung peer;
//  - STOP: checkpoint, Leave, return with stopped = true;
//  - coordinator lost: UNAVAILABLE naming it;
//  - done: checkpoint, Leave(finished).
//
// Thread-safety: Run() once, from one thread. Owns backend, model, metrics.
// Failure: Create() refuses bad options and unknown models (INVALID_ARGUMENT
// naming the flag) and device backends without a device gradient path
// (UNIMPLEMENTED). Run() returns the coordinator's error when it cannot
// join, the data server's for an unknown dataset, and after a failure that
// re-joining could not fix, an error naming the operation, the rank and the
// coordinator's reason.
#ifndef TANDEM_SERVICES_WORKER_TRAINER_H_
#define TANDEM_SERVICES_WORKER_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/data/sampler.h"
#include "common/kernels/backend.h"
#include "common/metrics/metrics.h"
#include "common/nn/model.h"
#include "services/worker/progress.h"
#include "services/worker/trainer_options.h"

namespace tandem {
namespace worker {

struct TrainResult {
  int64_t steps = 0;                 // optimizer steps applied in all (resumed included)
  data::Cursor cursor;               // data position after the last step
  bool stopped = false;              // ended by a STOP command
  int generations = 0;               // joins this worker made
  double test_accuracy = -1;         // last epoch-end evaluation, -1 if none
  double eval_loss = -1;             // its mean loss, -1 if none
  double final_loss = -1;            // mean over ranks of the last step's loss
  int64_t skipped_steps = 0;         // steps skipped for inf / NaN gradients (this process)
  std::string last_checkpoint;       // path rank 0 committed last ("" if none)
  std::string transport;             // gradient collectives of the last generation: gloo, shm or nccl
  std::string strategy;              // --sync of the last generation
};

class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  absl::StatusOr<TrainResult> Run();

  // The model (parameters after Run, for tests). A torchscript: model is
  // built by Run once the dataset is known: check has_model() first.
  nn::Model& model() { return *model_; }
  bool has_model() const { return model_ != nullptr; }
  // Metrics registry (nullptr before Run starts).
  Metrics* metrics() { return metrics_.get(); }

 private:
  class Loop;
  explicit Trainer(TrainerOptions options);

  TrainerOptions options_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Loop> loop_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_TRAINER_H_
