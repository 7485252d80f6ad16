#include "services/worker/coordinator_client.h"

#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/rpc/channel.h"
#include "common/rpc/grpc_status.h"
#include "common/status/status_macros.h"
#include "grpcpp/client_context.h"

namespace tandem {
namespace worker {
namespace {

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Create(
    const CoordinatorClientOptions& options) {
  if (options.target.empty()) {
    return absl::InvalidArgumentError("coordinator client: the coordinator address is empty "
                                      "(pass --coordinator=host:port)");
  }
  if (options.worker_id.empty()) {
    return absl::InvalidArgumentError("coordinator client: the worker id is empty");
  }
  if (options.join_attempts < 1 || options.rpc_timeout <= absl::ZeroDuration() ||
      options.join_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "coordinator client: join_attempts must be >= 1 and timeouts positive");
  }
  return std::unique_ptr<CoordinatorClient>(new CoordinatorClient(options));
}

CoordinatorClient::CoordinatorClient(const CoordinatorClientOptions& options)
    : options_(options),
      channel_(MakeChannel({.target = options.target})),
      stub_(v1::Coordinator::NewStub(channel_)) {
  // This process among any that claim the same worker id.
  std::random_device rd;
  instance_ = absl::StrCat(getpid(), "-", absl::Hex((uint64_t{rd()} << 32) | rd()));
}

CoordinatorClient::~CoordinatorClient() {
  StopHeartbeats();
  attachment_.reset();  // without Leave: the coordinator takes this process as gone
}

v1::JobRef CoordinatorClient::Job() const {
  v1::JobRef job;
  job.set_job_id(options_.job_id);
  return job;
}

absl::StatusOr<v1::JoinResponse> CoordinatorClient::Join(absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) timeout = options_.join_timeout;
  StopHeartbeats();
  v1::JoinRequest request;
  *request.mutable_job() = Job();
  request.set_worker_id(options_.worker_id);
  *request.mutable_endpoint() = options_.endpoint;
  request.set_local_devices(1);
  request.set_node(options_.node);
  request.set_instance(instance_);
  request.set_incarnation(options_.incarnation);
  if (attachment_ == nullptr) {
    v1::AttachRequest attach;
    *attach.mutable_job() = Job();
    attach.set_worker_id(options_.worker_id);
    attach.set_instance(instance_);
    attachment_ = std::make_unique<CoordinatorAttachment>(stub_.get(), std::move(attach));
  }
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Status status;
  v1::JoinResponse response;
  // A retried Join with the same worker_id is the same member to the
  // coordinator, so UNAVAILABLE (not started yet, restarting) is safe to
  // retry. Fail fast on a dead address: no wait_for_ready here.
  for (int attempt = 1; attempt <= options_.join_attempts; ++attempt) {
    grpc::ClientContext ctx;
    // The coordinator waits until just before the deadline and then answers
    // with its own reason (who is missing); keep the margin small so the
    // wait is about `timeout`.
    SetDeadline(&ctx, timeout + absl::Milliseconds(500));
    response.Clear();
    status = FromGrpcStatus(stub_->Join(&ctx, request, &response),
                            absl::StrCat("Coordinator.Join to ", options_.target));
    if (status.code() != absl::StatusCode::kUnavailable) break;
    if (attempt < options_.join_attempts) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
  }
  if (!status.ok()) {
    if (absl::IsUnavailable(status)) {
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the coordinator at ", options_.target, " after ",
          options_.join_attempts, " attempts (is it running?): ", status.message()));
    }
    return status;
  }
  {
    absl::MutexLock lock(&mu_);
    generation_ = response.generation();
    timing_.Clear();  // the previous generation's steps are not this one's
    rank_ = response.rank();
    command_ = Command{Command::kContinue, "", response.generation()};
    last_reply_ = absl::Now();
  }
  const absl::Duration period = response.heartbeat_period_ms() > 0
                                    ? absl::Milliseconds(response.heartbeat_period_ms())
                                    : options_.default_heartbeat_period;
  StartHeartbeats(period);
  return response;
}

void CoordinatorClient::StartHeartbeats(absl::Duration period) {
  stop_heartbeats_ = std::make_unique<absl::Notification>();
  absl::Notification* stop = stop_heartbeats_.get();
  heartbeat_thread_ = std::thread([this, period, stop] { HeartbeatLoop(period, stop); });
}

void CoordinatorClient::StopHeartbeats() {
  if (!heartbeat_thread_.joinable()) return;
  stop_heartbeats_->Notify();
  heartbeat_thread_.join();
  stop_heartbeats_.reset();
}

void CoordinatorClient::HeartbeatLoop(absl::Duration period, absl::Notification* stop) {
  while (!stop->WaitForNotificationWithTimeout(period)) {
    absl::Status s = HeartbeatOnce();
    if (!s.ok()) LOG(WARNING) << "worker " << options_.worker_id << ": heartbeat failed: " << s;
  }
}

absl::Status CoordinatorClient::HeartbeatOnce() {
  v1::HeartbeatRequest request;
  *request.mutable_job() = Job();
  request.set_worker_id(options_.worker_id);
  {
    absl::MutexLock lock(&mu_);
    request.set_generation(generation_);
    request.set_rank(rank_);
    *request.mutable_progress() = progress_;
    *request.mutable_timing() = timing_;
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.rpc_timeout);
  v1::HeartbeatResponse response;
  absl::Status status = FromGrpcStatus(stub_->Heartbeat(&ctx, request, &response),
                                       "Coordinator.Heartbeat");
  if (status.ok() && response.command() == v1::HeartbeatResponse::REJOIN && response.failure()) {
    std::function<void(int64_t, const std::string&)> handler;
    {
      absl::MutexLock lock(&mu_);
      handler = on_failure_;
    }
    if (handler) handler(request.generation(), response.reason());
  }
  absl::MutexLock lock(&mu_);
  if (!status.ok()) {
    if (absl::Now() - last_reply_ >= options_.lost_after && command_.kind == Command::kContinue) {
      command_ = Command{Command::kCoordinatorLost,
                         absl::StrCat("no heartbeat reply from the coordinator at ",
                                      options_.target, " for ",
                                      absl::FormatDuration(absl::Now() - last_reply_), ": ",
                                      status.message()),
                         generation_};
    }
    return status;
  }
  last_reply_ = absl::Now();
  // The steps it carried were counted; later ones stay for the next beat.
  const v1::StepTiming& sent = request.timing();
  timing_.set_steps(timing_.steps() - sent.steps());
  timing_.set_compute_seconds(timing_.compute_seconds() - sent.compute_seconds());
  timing_.set_data_wait_seconds(timing_.data_wait_seconds() - sent.data_wait_seconds());
  timing_.set_comm_seconds(timing_.comm_seconds() - sent.comm_seconds());
  timing_.set_other_seconds(timing_.other_seconds() - sent.other_seconds());
  if (timing_.steps() == 0) timing_.Clear();  // no rounding residue
  // A STOP or REJOIN sticks until the trainer acts on it (Join resets it).
  if (command_.kind == Command::kStop || command_.kind == Command::kRejoin) return status;
  switch (response.command()) {
    case v1::HeartbeatResponse::STOP:
      command_ = Command{Command::kStop, response.reason(), response.generation()};
      break;
    case v1::HeartbeatResponse::REJOIN:
      command_ = Command{Command::kRejoin, response.reason(), response.generation()};
      break;
    default:
      command_ = Command{Command::kContinue, "", response.generation()};
      break;
  }
  command_.global_batch = response.global_batch_size();
  command_.batch_reason = response.batch_reason();
  return status;
}

void CoordinatorClient::SetFailureHandler(
    std::function<void(int64_t generation, const std::string& reason)> handler) {
  absl::MutexLock lock(&mu_);
  on_failure_ = std::move(handler);
}

void CoordinatorClient::AddStepTiming(int64_t step, double compute, double data_wait,
                                      double comm, double other) {
  absl::MutexLock lock(&mu_);
  timing_.set_steps(timing_.steps() + 1);
  timing_.set_compute_seconds(timing_.compute_seconds() + compute);
  timing_.set_data_wait_seconds(timing_.data_wait_seconds() + data_wait);
  timing_.set_comm_seconds(timing_.comm_seconds() + comm);
  timing_.set_other_seconds(timing_.other_seconds() + other);
  timing_.set_last_step(step);
}

void CoordinatorClient::SetProgress(const v1::WorkerProgress& progress) {
  absl::MutexLock lock(&mu_);
  progress_ = progress;
}

Command CoordinatorClient::command() const {
  absl::MutexLock lock(&mu_);
  return command_;
}

int64_t CoordinatorClient::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

int CoordinatorClient::rank() const {
  absl::MutexLock lock(&mu_);
  return rank_;
}

absl::Status CoordinatorClient::ReportFailure(const std::string& operation, int peer_rank,
                                              const std::string& message, bool peer_exited) {
  v1::ReportFailureRequest request;
  *request.mutable_job() = Job();
  request.set_worker_id(options_.worker_id);
  {
    absl::MutexLock lock(&mu_);
    request.set_generation(generation_);
    request.set_rank(rank_);
  }
  request.set_operation(operation);
  request.set_peer_rank(peer_rank);
  request.set_message(message);
  request.set_peer_exited(peer_exited && peer_rank >= 0);
  v1::ReportFailureResponse response;
  RetryOptions retry;
  retry.call_timeout = options_.rpc_timeout;
  retry.max_attempts = 3;
  // Ending a generation twice is harmless: the coordinator ignores a report
  // for a generation that is already over.
  return CallWithRetry(retry, "Coordinator.ReportFailure", [&](grpc::ClientContext* ctx) {
    return stub_->ReportFailure(ctx, request, &response);
  });
}

absl::Status CoordinatorClient::CommitCheckpoint(const v1::CheckpointRecord& record) {
  return CommitCheckpoint(record, generation());
}

absl::Status CoordinatorClient::CommitCheckpoint(const v1::CheckpointRecord& record,
                                                 int64_t generation, int shard, int shards) {
  v1::CommitCheckpointRequest request;
  *request.mutable_job() = Job();
  request.set_worker_id(options_.worker_id);
  request.set_generation(generation);
  request.set_shard(shard);
  request.set_shards(shards);
  *request.mutable_checkpoint() = record;
  v1::CommitCheckpointResponse response;
  RetryOptions retry;
  retry.call_timeout = options_.rpc_timeout;
  retry.max_attempts = 3;
  return CallWithRetry(retry, "Coordinator.CommitCheckpoint", [&](grpc::ClientContext* ctx) {
    return stub_->CommitCheckpoint(ctx, request, &response);
  });
}

absl::StatusOr<v1::GetJobStatusResponse> CoordinatorClient::GetJobStatus() {
  v1::GetJobStatusRequest request;
  *request.mutable_job() = Job();
  v1::GetJobStatusResponse response;
  RetryOptions retry;
  retry.call_timeout = options_.rpc_timeout;
  retry.max_attempts = 2;
  RETURN_IF_ERROR(CallWithRetry(retry, "Coordinator.GetJobStatus", [&](grpc::ClientContext* ctx) {
    return stub_->GetJobStatus(ctx, request, &response);
  }));
  return response;
}

absl::Status CoordinatorClient::Leave(bool finished) {
  StopHeartbeats();
  v1::LeaveRequest request;
  *request.mutable_job() = Job();
  request.set_worker_id(options_.worker_id);
  request.set_generation(generation());
  request.set_finished(finished);
  v1::LeaveResponse response;
  RetryOptions retry;
  retry.call_timeout = options_.rpc_timeout;
  retry.max_attempts = 3;
  absl::Status left = CallWithRetry(retry, "Coordinator.Leave", [&](grpc::ClientContext* ctx) {
    return stub_->Leave(ctx, request, &response);
  });
  // Only after Leave: a member that left is not judged by its attachment.
  attachment_.reset();
  return left;
}

}  // namespace worker
}  // namespace tandem
