#include "services/worker/trainer.h"
#include "services/worker/trainer_loop.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/comm/factory.h"
#include "common/comm/peer_exited.h"
#include "common/kernels/factory.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/trace/process_trace.h"
#include "common/trace/trace.h"
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
#include "services/worker/worker_model.h"

namespace tandem {
namespace worker {
namespace {

// Errors after which a new generation may succeed: the membership changed
// (a peer died or hung, the generation ended under us, a connection
// dropped). Everything else is a configuration or data problem that a
// re-join would only repeat.
bool MembershipChanged(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsAborted(s) ||
         absl::IsCancelled(s);
}

}  // namespace

absl::StatusOr<TrainResult> Trainer::Loop::Run() {
  InstallProgressSink();
  ASSIGN_OR_RETURN(nn::ModelSpec spec, nn::ParseModelSpec(o_.model));
  RETURN_IF_ERROR(StartMetrics());
  RETURN_IF_ERROR(ProbeDataAndModel(spec));
  RETURN_IF_ERROR(ConnectCoordinator());
  RETURN_IF_ERROR(PrepareStepState());
  while (true) {
    if (result_.generations >= o_.max_rejoins) {
      return absl::AbortedError(absl::StrCat("gave up after ", result_.generations,
                                             " generations; last failure: ", failure_));
    }
    Generation g;
    RETURN_IF_ERROR(JoinGeneration(g));
    absl::StatusOr<Outcome> outcome = RunGeneration(g);
    if (!outcome.ok()) {
      if (!MembershipChanged(outcome.status())) {
        if (Crashed()) return outcome.status();  // no Leave: peers see a lost worker
        (void)client_->Leave(false);
        return outcome.status();
      }
      ReportFailure(g, outcome.status());
      RetainState(g);
      continue;
    }
    if (*outcome == Outcome::kRejoin) {
      RetainState(g);
      continue;
    }
    return Finish(*outcome);
  }
}

absl::StatusOr<TrainResult> Trainer::Loop::Finish(Outcome outcome) {
  result_.steps = state_.step;
  result_.skipped_steps = precision_->skipped_steps();
  result_.cursor = state_.cursor;
  result_.stopped = outcome == Outcome::kStopped;
  RETURN_IF_ERROR(client_->Leave(/*finished=*/!result_.stopped));
  return result_;
}

void Trainer::Loop::ReportFailure(Generation& g, const absl::Status& s) {
  // Report at once, naming the peer when the transport saw its process
  // exit: the coordinator then ends the generation and stops waiting for
  // that rank now, not after its missed heartbeats. One heartbeat first
  // tells a planned end (a worker joined: REJOIN without a failure, so
  // nothing was aborted) from a failure: a planned end refuses what this
  // rank sent after it with ABORTED, which is the membership changing, not
  // a step failing.
  (void)client_->HeartbeatOnce();
  Command c = client_->command();
  const bool planned = c.kind == Command::kRejoin && absl::IsAborted(s) && !c.reason.empty() &&
                       abort_.reason(g.join.generation()).empty();
  // Report even when the generation has ended already (a planned resize):
  // the coordinator then counts it as failed, so the peers still waiting
  // in its collectives for this rank abort them too.
  // A peer seen to exit (shm: its pid is gone) is named as exited; one
  // whose connection broke (Gloo TCP) as accused only: the coordinator
  // evicts it at once only when its own attachment to it closed too.
  const int exited = ExitedPeerRank(s.message());
  const int peer = exited >= 0 ? exited : BrokenPeerRank(s.message());
  (void)client_->ReportFailure("training step", peer, std::string(s.message()), exited >= 0);
  if (c.kind == Command::kContinue) {
    (void)client_->HeartbeatOnce();  // the coordinator's reason, for the message below
    c = client_->command();
  }
  failure_ = planned ? absl::StrCat("generation ", g.join.generation(), " ended: ", c.reason,
                                    " (rank ", g.rank(), ": ", s.message(), ")")
                     : absl::StrCat("generation ", g.join.generation(), ", rank ", g.rank(),
                                    ": training step failed: ", s.message());
  if (!planned && !c.reason.empty() && !absl::StrContains(s.message(), c.reason)) {
    absl::StrAppend(&failure_, " (coordinator: ", c.reason, ")");
  }
  LOG(WARNING) << "worker " << o_.worker_id << ": " << failure_ << "; re-joining";
  // On the console too (rank 0 speaks for the job): who was lost, and
  // which collective gave up.
  if (g.rank() == 0) Print(failure_ + "; re-joining");
}

absl::StatusOr<Trainer::Loop::Outcome> Trainer::Loop::RunGeneration(Generation& g) {
  GenerationEnv env{&o_, client_.get(), t_->backend_.get(), t_->model_.get()};
  RETURN_IF_ERROR(SetUpGeneration(env, &g));
  if (trace::Enabled()) {  // this rank's track; the generation as a moment on it
    trace::SetProcessTrack(g.rank(), absl::StrCat("worker rank ", g.rank()), g.rank());
    trace::MarkInstant("generation", "control", g.join.generation());
  }
  abort_.Arm(g.join.generation(),
             {g.ctl.get(), g.grad.world.get(), g.grad.intra.get(), g.grad.inter.get()});
  struct Disarm {
    AbortSwitch* sw;
    ~Disarm() { sw->Disarm(); }
  } disarm{&abort_};
  result_.transport = g.grad.world->backend();
  result_.strategy = g.sync->name();
  RETURN_IF_ERROR(RestoreState(g));
  const PlanInputs inputs{o_, probe_.train_samples, g.world(),
                          WantedGlobalBatch(g.join.global_batch_size())};
  ASSIGN_OR_RETURN(TrainingPlan plan, PlanGeneration(inputs, &state_));
  GenerationRun run{inputs, std::move(plan)};
  RETURN_IF_ERROR(StartStream(g, run.plan));
  const bool tokens = probe_.inputs.kind == InputSpec::Kind::kTokens;
  ProgressReporter progress(ProgressOptions{o_.log_every, o_.profile, g.rank() == 0,
                                            tokens ? probe_.inputs.width : 0, progress_sink_});
  StepRunner runner(t_->model_.get(), t_->backend_.get(), stager_.get(), o_.accumulation);
  runner.set_sample_log(sample_log_.get(), g.join.generation());
  runner.set_precision(precision_.get());
  runner.set_measure_noise(o_.batch_auto && g.world() > 1);
  runner.set_debug_delays(o_.debug_extra_compute, o_.debug_extra_data);
  while (state_.step < run.plan.total_steps) {
    ASSIGN_OR_RETURN(std::optional<Outcome> end, TrainStep(g, run, runner, progress));
    if (end.has_value()) return *end;
  }
  state_.loss_scaler = precision_->SerializeState();
  ASSIGN_OR_RETURN(std::string path, checkpointer_->Write(g, &state_));
  if (!path.empty()) result_.last_checkpoint = path;
  RETURN_IF_ERROR(LeaveParametersWhole(g));
  return Outcome::kDone;
}

absl::Status Trainer::Loop::RestoreState(Generation& g) {
  ASSIGN_OR_RETURN(bool resumed, checkpointer_->Restore(g, &state_));
  if (absl::Status s = precision_->RestoreState(state_.loss_scaler); !s.ok()) {
    return absl::DataLossError(absl::StrCat(checkpointer_->restored_path(),
                                            ": the loss-scaler record: ", s.message()));
  }
  precision_->set_rank(g.rank());
  for (const std::string& w : checkpointer_->TakeWarnings()) Print("warning: " + w);
  const MemoryRecovery& mem = checkpointer_->last_recovery();
  // Steps some rank had completed that this generation trains again.
  const std::string redone =
      mem.reached >= 0
          ? absl::StrCat(" (", std::max<int64_t>(0, mem.reached - state_.step), " steps redone)")
          : "";
  if (g.rank() == 0 && !mem.not_from_peers.empty()) {
    Print(absl::StrCat("peer memory cannot serve: ", mem.not_from_peers,
                       "; restoring from the disk checkpoint"));
  }
  if (resumed && g.rank() == 0 && mem.from_peers) {
    Print(absl::StrCat("recovered from peer memory at step ", state_.step, redone, " (epoch ",
                       state_.cursor.epoch + 1, ", sample ", state_.samples_in_epoch,
                       ") in generation ", g.join.generation(), " with ", g.world(),
                       " worker(s); ", mem.received, " shard(s) from a neighbour's copy"));
  } else if (resumed && g.rank() == 0 && mem.restored) {
    Print(absl::StrCat("recovered from memory at step ", state_.step, redone, " (epoch ",
                       state_.cursor.epoch + 1, ", sample ", state_.samples_in_epoch,
                       ") in generation ", g.join.generation(), " with ", g.world(),
                       " worker(s); state sent from rank ", mem.source, " to ", mem.received,
                       " rank(s)"));
  } else if (resumed && g.rank() == 0) {
    Print(absl::StrCat("resumed from ", checkpointer_->restored_path(), " at step ", state_.step,
                       " (epoch ", state_.cursor.epoch + 1, ", sample ", state_.samples_in_epoch,
                       ") in generation ", g.join.generation(), " with ", g.world(),
                       " worker(s)", redone));
  } else if (g.rank() == 0 && mem.reached > 0) {  // lost work, no checkpoint to go back to
    Print(absl::StrCat("restarted from the initial state (no committed checkpoint) in generation ",
                       g.join.generation(), " with ", g.world(), " worker(s)", redone));
  }
  return absl::OkStatus();
}

absl::Status Trainer::Loop::StartStream(Generation& g, const TrainingPlan& plan) {
  g.lr_schedule = plan.schedule;
  metrics_->SetGlobalBatch(plan.global_batch * o_.accumulation);
  if (plan.steps_left <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(g.data, data::PrefetchClient::Start(
                               TrainStream(o_, plan, state_, g.rank(), g.world(),
                                           probe_.inputs.normalize_to_f32,
                                           client_metrics_.get())));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Trainer::Loop::Outcome>> Trainer::Loop::TrainStep(
    Generation& g, GenerationRun& run, StepRunner& runner, ProgressReporter& progress) {
  const absl::Time step_start = absl::Now();
  optim::StepContext ctx;
  ctx.step = state_.step + 1;
  trace::MarkStep(ctx.step);
  trace::Span step_span("step", "step", -1, ctx.step);
  ctx.lr = run.plan.schedule.LearningRate(ctx.step);
  ASSIGN_OR_RETURN(StepOutput out, runner.Run(*g.data, *g.sync, ctx));
  // The step is applied: from here on a failure leaves this rank's state
  // at the new step (what a recovery from memory continues from).
  ++state_.step;
  state_.cursor = out.cursor;
  state_.samples_in_epoch =
      state_.cursor.offset + state_.cursor.step_in_epoch * run.plan.global_batch;
  checkpointer_->NoteStep(state_);  // a shard-server recovery's data position
  if (Crashed()) return absl::InternalError(absl::StrCat("crash_after_step ", state_.step));
  // Rank 0's BatchNorm statistics everywhere, as PyTorch DDP's default.
  if (o_.broadcast_buffers) {
    RETURN_IF_ERROR(BroadcastModelBuffers(*g.ctl, g.rank(), *t_->model_, nullptr));
  }

  // Sharded strategies: every --replica_every steps, this rank's shard to
  // host memory and (in the background) to the next rank.
  RETURN_IF_ERROR(checkpointer_->Replicate(g, state_));
  metrics_->SetReplicaBytes(checkpointer_->replica_bytes());

  // Every rank acts on the coordinator's command at the same step.
  const Command c = client_->command();
  StepVote mine;
  mine.stop = c.kind == Command::kStop;
  mine.rejoin = c.kind == Command::kRejoin;
  mine.coordinator_lost = c.kind == Command::kCoordinatorLost;
  mine.loss = out.mean_loss;
  const bool dynamic = o_.batch_auto || !o_.batch_schedule.empty();
  mine.wanted_global_batch = g.rank() == 0 && dynamic ? WantedGlobalBatch(c.global_batch) : 0;
  mine.local_grad_sum_sq = static_cast<float>(std::max(0.0, out.local_grad_sum_sq));
  ASSIGN_OR_RETURN(const StepVote vote, AgreeOnStep(*g.ctl, mine));
  out.times.total = absl::ToDoubleSeconds(absl::Now() - step_start);
  ReportStep(g, run, ctx, out, vote, progress);

  if (vote.coordinator_lost) {
    return absl::UnavailableError(absl::StrCat("lost the coordinator: ", c.reason));
  }
  if (vote.rejoin) {
    failure_ = absl::StrCat("generation ", g.join.generation(), " ended",
                            c.reason.empty() ? "" : ": ", c.reason);
    if (g.rank() == 0) Print(failure_ + "; re-joining");
    return Outcome::kRejoin;
  }
  if (vote.stop) {
    RETURN_IF_ERROR(Stop(g, c));
    return Outcome::kStopped;
  }
  const absl::Time aside = absl::Now();
  RETURN_IF_ERROR(EvaluateAndCheckpoint(g, run.plan, out.epoch_ended));
  RETURN_IF_ERROR(MaybeResizeBatch(g, run, vote.wanted_global_batch, c));
  progress.Exclude(absl::Now() - aside);  // rates count training only
  // For the coordinator's straggler detector, with the next heartbeat.
  const StepTimes& t = out.times;
  const double compute = t.forward + t.backward + t.optimizer;
  const double other = absl::ToDoubleSeconds(absl::Now() - step_start) - compute - t.data_wait -
                       t.comm_wait;
  client_->AddStepTiming(state_.step, compute, t.data_wait, t.comm_wait, std::max(0.0, other));
  return std::nullopt;
}

void Trainer::Loop::ReportStep(Generation& g, GenerationRun& run, const optim::StepContext& ctx,
                               const StepOutput& out, const StepVote& vote,
                               ProgressReporter& progress) {
  const double mean_loss = vote.loss / g.world();
  if (out.local_grad_sum_sq >= 0 && out.global_grad_sum_sq >= 0 &&
      std::isfinite(vote.local_grad_sum_sq) && std::isfinite(out.global_grad_sum_sq)) {
    // Mean gradients: a rank's is its sum over k micro-batches / k, the
    // synced one the sum over ranks / (world k); both loss-scaled.
    const double k = o_.accumulation * std::max(1.0, static_cast<double>(precision_->loss_scale()));
    run.noise_local += vote.local_grad_sum_sq / g.world() / (k * k);
    run.noise_global += out.global_grad_sum_sq / (k * k * g.world() * g.world());
    ++run.noise_n;
  }
  result_.final_loss = mean_loss;
  metrics_->RecordStep(out.times, out.samples, mean_loss, *g.sync, &g.last_stats);
  metrics_->RecordNumerics(!out.verdict.applied, precision_->loss_scale(),
                           g.sync->last_step().grad_sum_sq);
  if (!out.verdict.applied && g.rank() == 0) {
    Print(absl::StrCat("step ", state_.step, " skipped: ", out.verdict.skipped_because));
  }
  progress.AddStep(mean_loss, out.samples * g.world(), out.times);
  ProgressPoint pp;
  pp.step = state_.step;
  pp.total_steps = run.plan.total_steps;
  // The epoch the step trained in (1-based).
  pp.epoch = state_.cursor.step_in_epoch == 0 ? state_.cursor.epoch : state_.cursor.epoch + 1;
  pp.samples_in_epoch = state_.samples_in_epoch;
  pp.lr = ctx.lr;
  pp.world = g.world();
  pp.global_batch = run.plan.global_batch * o_.accumulation;
  if (run.noise_n > 0) {
    pp.local_grad_sq = run.noise_local / run.noise_n;
    pp.global_grad_sq = run.noise_global / run.noise_n;
  }
  if (auto report = progress.MaybeReport(pp)) {
    client_->SetProgress(*report);
    run.noise_local = run.noise_global = 0;
    run.noise_n = 0;
  }
}

absl::Status Trainer::Loop::Stop(Generation& g, const Command& c) {
  state_.loss_scaler = precision_->SerializeState();
  RETURN_IF_ERROR(checkpointer_->Write(g, &state_).status());
  // A rank that leaves ends the generation: wait until rank 0 has
  // committed the checkpoint before anyone does.
  RETURN_IF_ERROR(g.ctl->Barrier());
  RETURN_IF_ERROR(LeaveParametersWhole(g));
  if (g.rank() == 0) {  // another rank may have heard the STOP first
    Print(absl::StrCat("stopping at step ", state_.step, ": ",
                       c.reason.empty() ? "the coordinator asked to stop" : c.reason));
  }
  return absl::OkStatus();
}

absl::Status Trainer::Loop::EvaluateAndCheckpoint(Generation& g, const TrainingPlan& plan,
                                                  bool epoch_ended) {
  // At every epoch end, and once more where --max_steps ends the run
  // inside an epoch (else such a run would report no accuracy at all).
  const bool ended_inside_epoch = !epoch_ended && state_.step >= plan.total_steps;
  if (epoch_ended || ended_inside_epoch) {
    ASSIGN_OR_RETURN(EvalResult ev, evaluator_->Run(g));
    if (ev.samples > 0) {
      result_.test_accuracy = ev.accuracy;
      result_.eval_loss = ev.loss;
      // The epoch that just ended: the cursor already points into the next.
      const std::string when = epoch_ended ? absl::StrCat("epoch ", state_.cursor.epoch)
                                           : absl::StrCat("final (step ", state_.step, ")");
      if (g.rank() == 0) Print(FormatEvalLine(ev, when, probe_.inputs.kind));
    }
  }
  if (o_.checkpoint_every > 0 && state_.step % o_.checkpoint_every == 0 &&
      state_.step < plan.total_steps) {
    state_.loss_scaler = precision_->SerializeState();
    ASSIGN_OR_RETURN(std::string path, checkpointer_->WritePeriodic(g, &state_));
    if (!path.empty()) result_.last_checkpoint = path;
  }
  return absl::OkStatus();
}

// Dynamic batch sizing: every rank switches here, at this step boundary, to
// rank 0's wanted global batch. The stream restarts at the exact sample
// reached (the cursor is a sample position), the plan and the learning rate
// are recomputed for the new batch.
absl::Status Trainer::Loop::MaybeResizeBatch(Generation& g, GenerationRun& run, int64_t agreed,
                                             const Command& c) {
  if (agreed <= 0 || agreed == run.plan.global_batch || state_.step >= run.plan.total_steps) {
    return absl::OkStatus();
  }
  const int64_t before = run.plan.global_batch;
  g.data.reset();
  run.inputs.global_batch = agreed;
  ASSIGN_OR_RETURN(run.plan, PlanGeneration(run.inputs, &state_));
  RETURN_IF_ERROR(StartStream(g, run.plan));
  if (g.rank() == 0) {
    const std::string why = !o_.batch_schedule.empty()
                                ? std::string("--batch_schedule")
                                : (c.batch_reason.empty() ? std::string("coordinator")
                                                          : "coordinator: " + c.batch_reason);
    Print(absl::StrFormat("batch %d -> %d at step %d (epoch %d, sample %d), lr %.4f (%s)",
                          static_cast<long long>(before), static_cast<long long>(agreed),
                          static_cast<long long>(state_.step),
                          static_cast<long long>(state_.cursor.epoch + 1),
                          static_cast<long long>(state_.samples_in_epoch),
                          run.plan.schedule.LearningRate(state_.step + 1), why));
  }
  return absl::OkStatus();
}

Trainer::Trainer(TrainerOptions options) : options_(std::move(options)) {}
Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(TrainerOptions options) {
  RETURN_IF_ERROR(ValidateTrainerOptions(options));
  std::unique_ptr<Trainer> t(new Trainer(std::move(options)));
  kernels::BackendOptions bo;
  bo.device = t->options_.backend;
  bo.cuda_device = t->options_.cuda_device;
  // bf16 GEMMs where the backend has them (the CPU backend computes in fp32).
  if (t->options_.precision == "bf16") bo.math_mode = kernels::MathMode::kBf16;
  // --backend cuda means a GPU: training on the CPU instead (the factory's
  // fallback) would pass for success at a fraction of the speed.
  bo.allow_cpu_fallback = false;
  absl::StatusOr<std::unique_ptr<kernels::Backend>> backend = kernels::CreateBackend(bo);
  if (!backend.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "backend \"", bo.device, "\" unavailable (", backend.status().message(),
        "); use --backend cpu, or run where a GPU and its driver are"));
  }
  t->backend_ = std::move(*backend);
  if (!t->backend_->host_accessible() && !TransportAvailable("nccl")) {
    // Gloo / shm reduce host memory; device memory needs NCCL (CUDA builds).
    return absl::UnimplementedError(absl::StrCat(
        "--backend=", t->options_.backend, " gave the device backend '", t->backend_->name(),
        "', but this worker has no gradient path for device memory (NCCL needs a build with "
        "CUDA); use --backend=cpu"));
  }
  if (!ModelNeedsDataset(t->options_)) {  // else built once the dataset is known (Run)
    ASSIGN_OR_RETURN(t->model_, CreateWorkerModel(t->options_, t->backend_.get(), nullptr));
  }
  t->loop_ = std::make_unique<Loop>(t.get());
  return t;
}

absl::StatusOr<TrainResult> Trainer::Run() { return loop_->Run(); }

}  // namespace worker
}  // namespace tandem
