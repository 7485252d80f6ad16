// Trainer::Loop: the training loop behind Trainer::Run, declared here so
// its once-per-process set-up (trainer_setup.cc) and its generations and
// steps (trainer.cc) can live in files of their own. Internal to the
// trainer target: nothing else includes it.
//
// Thread-safety and ownership: as Trainer (one thread runs the loop; it
// owns the coordinator client, the checkpointer and the per-run state).
#ifndef TANDEM_SERVICES_WORKER_TRAINER_LOOP_H_
#define TANDEM_SERVICES_WORKER_TRAINER_LOOP_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/worker/abort_switch.h"
#include "services/worker/batch_stager.h"
#include "services/worker/checkpointer.h"
#include "services/worker/coordinator_client.h"
#include "services/worker/dataset_probe.h"
#include "services/worker/evaluator.h"
#include "services/worker/generation.h"
#include "services/worker/model_buffers.h"
#include "services/worker/progress.h"
#include "services/worker/sample_log.h"
#include "services/worker/step_precision.h"
#include "services/worker/step_runner.h"
#include "services/worker/step_vote.h"
#include "services/worker/training_plan.h"
#include "services/worker/worker_metrics.h"
#include "services/worker/trainer.h"
#include "services/worker/worker_model.h"

namespace tandem {
namespace worker {

class Trainer::Loop {
 public:
  explicit Loop(Trainer* t) : t_(t), o_(t->options_) {}
  absl::StatusOr<TrainResult> Run();

 private:
  enum class Outcome { kDone, kStopped, kRejoin };
  // Run's steps, once per process: where progress lines go, the metrics
  // endpoint, the datasets' shapes and the model built for them (with the
  // batch stager), the coordinator connection, and the state that outlives
  // generations (sample log, loss scale, checkpointer).
  void InstallProgressSink();
  absl::Status StartMetrics();
  absl::Status ProbeDataAndModel(const nn::ModelSpec& spec);
  absl::Status ConnectCoordinator();
  absl::Status PrepareStepState();
  // Joins the next generation into `g`; the first join also creates the
  // rank-labelled metrics and the evaluator (CreateRankMetrics).
  absl::Status JoinGeneration(Generation& g);
  absl::Status CreateRankMetrics(int rank);
  // The result of a run that ended with `outcome` (kDone or kStopped); leaves.
  absl::StatusOr<TrainResult> Finish(Outcome outcome);
  // One generation's plan and the --batch auto gradient-noise window (sums
  // of the per-rank and synced gradient norms since the last report).
  struct GenerationRun {
    PlanInputs inputs;
    TrainingPlan plan;
    double noise_local = 0, noise_global = 0;
    int noise_n = 0;
  };
  // Set up, restore, train to the end of the plan, a stop or a re-join.
  absl::StatusOr<Outcome> RunGeneration(Generation& g);
  // The checkpoint (if any) and the loss scale; says so on rank 0.
  absl::Status RestoreState(Generation& g);
  // The learning-rate schedule, the batch metric and the data stream of `plan`.
  absl::Status StartStream(Generation& g, const TrainingPlan& plan);
  // One optimizer step, the vote after it and what the vote decides; an
  // outcome ends the generation.
  absl::StatusOr<std::optional<Outcome>> TrainStep(Generation& g, GenerationRun& run,
                                                   StepRunner& runner, ProgressReporter& progress);
  // Loss, metrics, the skipped-step line and the progress window.
  void ReportStep(Generation& g, GenerationRun& run, const optim::StepContext& ctx,
                  const StepOutput& out, const StepVote& vote, ProgressReporter& progress);
  // The coordinator's STOP: checkpoint, wait for rank 0's commit, leave.
  absl::Status Stop(Generation& g, const Command& c);
  absl::Status EvaluateAndCheckpoint(Generation& g, const TrainingPlan& plan, bool epoch_ended);
  absl::Status MaybeResizeBatch(Generation& g, GenerationRun& run, int64_t agreed,
                                const Command& c);
  void ReportFailure(Generation& g, const absl::Status& s);
  bool Crashed() const { return o_.crash_after_step > 0 && state_.step == o_.crash_after_step; }
  // The generation ended: this rank's state stays for the next one's
  // restore (recovery from memory).
  void RetainState(Generation& g) {
    state_.loss_scaler = precision_->SerializeState();
    checkpointer_->Retain(g, state_);
  }
  void Print(const std::string& line) { progress_sink_(line); }
  // The global batch the options ask for now (0 = batch_size x world): the
  // forced schedule at the current step, else with --batch auto the
  // coordinator's decision `decided` (0 = none yet).
  int64_t WantedGlobalBatch(int64_t decided) const {
    if (!o_.batch_schedule.empty()) return ScheduledGlobalBatch(o_, state_.step);
    // The coordinator decides samples per optimizer step.
    return o_.batch_auto && decided > 0 ? std::max<int64_t>(1, decided / o_.accumulation) : 0;
  }

  Trainer* const t_;
  const TrainerOptions& o_;
  std::function<void(const std::string&)> progress_sink_;
  // Before client_: its heartbeat thread fires the switch until it is joined.
  AbortSwitch abort_;
  std::unique_ptr<CoordinatorClient> client_;
  DatasetProbe probe_;
  std::unique_ptr<BatchStager> stager_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<data::ClientMetrics> client_metrics_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<SampleLog> sample_log_;  // --sample_log_dir, else null
  std::unique_ptr<StepPrecision> precision_;  // survives generations (loss scale)
  TrainingState state_;  // survives generations
  TrainResult result_;
  std::string failure_;  // the last membership failure, for the final error
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_TRAINER_LOOP_H_
