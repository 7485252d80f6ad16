// Trainer::Loop's once-per-process set-up: where progress lines go, the
// metrics endpoint, the datasets and the model, the coordinator connection,
// the state that outlives generations, and each join.
#include "services/worker/trainer_loop.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
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

void Trainer::Loop::InstallProgressSink() {
  progress_sink_ = o_.progress ? o_.progress : [](const std::string& line) {
    std::fprintf(stdout, "%s\n", line.c_str());
    std::fflush(stdout);
  };
}

absl::Status Trainer::Loop::StartMetrics() {
  MetricsOptions mo;
  mo.port = o_.metrics_port;
  mo.labels = {{"job", o_.job_id}, {"service", "worker"}};
  ASSIGN_OR_RETURN(t_->metrics_, Metrics::Create(mo));
  // Bound before joining (port 0 in tandem local) and logged in the form
  // `tandem local` reads back, so no one has to guess a free port.
  if (t_->metrics_->port() > 0) {
    LOG(INFO) << "worker " << o_.worker_id << ": metrics port " << t_->metrics_->port();
  }
  return absl::OkStatus();
}

absl::Status Trainer::Loop::ProbeDataAndModel(const nn::ModelSpec& spec) {
  ProbeOptions po;
  po.data_servers = o_.data_servers;
  po.dataset = o_.dataset;
  po.eval_dataset = o_.eval_dataset;
  po.connect_attempts = o_.connect_attempts;
  ASSIGN_OR_RETURN(probe_, ProbeDatasets(po, spec));
  if (t_->model_ == nullptr) {  // torchscript: checked against the samples
    ASSIGN_OR_RETURN(t_->model_, CreateWorkerModel(o_, t_->backend_.get(), &probe_.inputs));
  }
  // Sized once for the largest per-rank batch --batch auto / --batch_schedule
  // may ask for.
  ASSIGN_OR_RETURN(stager_, BatchStager::Create(t_->backend_.get(), probe_.inputs,
                                                static_cast<int>(LocalBatchCapacity(o_))));
  return absl::OkStatus();
}

absl::Status Trainer::Loop::ConnectCoordinator() {
  CoordinatorClientOptions co;
  co.target = o_.coordinator;
  co.job_id = o_.job_id;
  co.worker_id = o_.worker_id;
  co.incarnation = o_.incarnation;
  co.endpoint.set_host(o_.hostname);
  co.endpoint.set_metrics_port(std::max(t_->metrics_->port(), 0));
  co.node = o_.node_id.empty() ? o_.hostname : o_.node_id;
  co.join_attempts = o_.connect_attempts;
  co.lost_after = o_.coordinator_lost_after;
  ASSIGN_OR_RETURN(client_, CoordinatorClient::Create(co));
  // The coordinator ended our generation by a failure: abort its
  // collectives now, so a hung peer costs a heartbeat, not the timeout.
  client_->SetFailureHandler(
      [this](int64_t generation, const std::string& reason) { abort_.Fire(generation, reason); });
  return absl::OkStatus();
}

absl::Status Trainer::Loop::PrepareStepState() {
  nn::Model& model = *t_->model_;
  if (!o_.sample_log_dir.empty()) {
    ASSIGN_OR_RETURN(sample_log_,
                     SampleLog::Create(absl::StrCat(o_.sample_log_dir, "/", o_.worker_id, ".samples")));
  }
  ASSIGN_OR_RETURN(StepPrecisionOptions spo, MakeStepPrecisionOptions(o_));
  ASSIGN_OR_RETURN(precision_, StepPrecision::Create(spo, t_->backend_.get(), &model));
  CheckpointerOptions ck;
  ck.dir = o_.checkpoint_dir;
  ck.model_text = o_.model;
  ck.fingerprint = checkpoint::ModelFingerprint(
      absl::StrCat(model.spec().ToString(), "\n", model.layout().DebugString()));
  ck.seed = o_.seed;
  ck.batch_size = o_.batch_size;
  ck.background = o_.background_checkpoint;
  ck.write_options = o_.checkpoint_write_options;
  ck.recover_from_memory = o_.recover_from_memory;
  ck.replica.every = o_.replica_every;
  ck.replica.synchronous = o_.replica_synchronous;
  ck.replica.link.hostname = o_.hostname;
  ck.replica.link.timeout = o_.collective_timeout;
  checkpointer_ = std::make_unique<Checkpointer>(ck, t_->backend_.get(), &model, client_.get());
  return absl::OkStatus();
}

absl::Status Trainer::Loop::JoinGeneration(Generation& g) {
  absl::StatusOr<v1::JoinResponse> join =
      client_->Join(result_.generations == 0 ? o_.join_timeout : o_.rejoin_timeout);
  if (!join.ok()) {
    if (failure_.empty()) return join.status();
    return absl::Status(join.status().code(), absl::StrCat(failure_, "; re-joining failed: ",
                                                           join.status().message()));
  }
  g.join = *join;
  ++result_.generations;
  if (metrics_ == nullptr) RETURN_IF_ERROR(CreateRankMetrics(g.rank()));
  metrics_->SetGeneration(g.join.generation());
  return absl::OkStatus();
}

absl::Status Trainer::Loop::CreateRankMetrics(int rank) {
  RETURN_IF_ERROR(t_->metrics_->AddConstLabel("rank", absl::StrCat(rank)));
  ASSIGN_OR_RETURN(data::ClientMetrics cm, data::ClientMetrics::Create(t_->metrics_.get()));
  client_metrics_ = std::make_unique<data::ClientMetrics>(cm);
  ASSIGN_OR_RETURN(metrics_, WorkerMetrics::Create(t_->metrics_.get(), o_.sync.strategy));
  RETURN_IF_ERROR(checkpointer_->EnableMetrics(t_->metrics_.get()));
  EvaluatorOptions eo{o_.data_servers,    o_.eval_dataset, probe_.eval_samples,
                      o_.batch_size,      probe_.inputs.normalize_to_f32,
                      client_metrics_.get()};
  evaluator_ = std::make_unique<Evaluator>(eo, t_->backend_.get(), t_->model_.get(),
                                           stager_.get());
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
