#include "services/coordinator/coordinator_core.h"

#include "absl/strings/str_cat.h"
#include "common/io/file.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"

namespace tandem {
absl::Status ValidateCoordinatorOptions(const CoordinatorOptions& o) {
  if (o.job_id.empty()) return absl::InvalidArgumentError("job id must not be empty");
  if (o.min_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_workers is ", o.min_workers, ": a job needs at least 1 worker"));
  }
  if (o.max_workers < o.min_workers) {
    return absl::InvalidArgumentError(absl::StrCat("min_workers (", o.min_workers,
                                                   ") is greater than max_workers (",
                                                   o.max_workers, "): make min <= max"));
  }
  if (o.heartbeat_period <= absl::ZeroDuration() || o.heartbeat_misses < 1) {
    return absl::InvalidArgumentError(
        "heartbeat period must be positive and heartbeat misses at least 1");
  }
  if (o.step_time_factor < 0 || o.stall_gap < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "step_time_factor and stall_gap must not be negative (0 turns each off)");
  }
  if (o.settle_time < absl::ZeroDuration() || o.detach_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("settle time and detach grace must not be negative");
  }
  if (o.batch_auto.max_global_batch > 0 || o.batch_auto.min_global_batch > 0) {
    BatchControllerOptions b = o.batch_auto;
    if (b.reference_batch == 0) b.reference_batch = 1;  // 0 = the first reported
    RETURN_IF_ERROR(ValidateBatchControllerOptions(b));
  }
  RETURN_IF_ERROR(ValidateStragglerOptions(o.straggler));
  if (o.global_batch_size < 0) {
    return absl::InvalidArgumentError("global batch size must not be negative");
  }
  return absl::OkStatus();
}

namespace {

StragglerOptions WithClock(StragglerOptions o, std::function<absl::Time()> clock) {
  o.clock = std::move(clock);
  return o;
}

}  // namespace

CoordinatorCore::CoordinatorCore(const CoordinatorOptions& options)
    : options_(options),
      stragglers_(std::make_unique<StragglerDetector>(
          WithClock(options.straggler, options.clock))) {
  global_batch_size_ = options.global_batch_size;
}

std::string CoordinatorCore::StatePath() const {
  return options_.state_dir + "/coordinator_state.pb";
}

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(
    const CoordinatorOptions& options) {
  RETURN_IF_ERROR(ValidateCoordinatorOptions(options));
  std::unique_ptr<CoordinatorCore> core(new CoordinatorCore(options));
  if (options.state_dir.empty()) return core;
  RETURN_IF_ERROR(MakeDirectories(options.state_dir));
  absl::StatusOr<std::string> bytes = ReadFileToString(core->StatePath());
  if (!bytes.ok() && bytes.status().code() != absl::StatusCode::kNotFound) return bytes.status();
  if (bytes.ok()) {
    v1::CoordinatorState state;
    if (!state.ParseFromString(*bytes)) {
      return absl::DataLossError(absl::StrCat(
          core->StatePath(), " is corrupt: move it away to start the job from scratch"));
    }
    if (state.job_id() != options.job_id) {
      return absl::FailedPreconditionError(
          absl::StrCat(options.state_dir, " holds the state of job '", state.job_id(),
                       "', not '", options.job_id, "': use another --state_dir"));
    }
    absl::MutexLock lock(&core->mu_);
    core->generation_ = state.generation();
    core->restarts_ = state.restarts();
    core->last_checkpoint_ = state.last_checkpoint();
    core->earlier_checkpoints_.assign(state.earlier_checkpoints().begin(),
                                      state.earlier_checkpoints().end());
    if (state.global_batch_size() > 0) core->global_batch_size_ = state.global_batch_size();
    if (state.finished()) core->phase_ = Phase::kFinished;
    if (!state.finished() && state.running() && state.members_size() > 0) {
      // The generation was running when the coordinator stopped: carry on
      // with it. Every member gets two heartbeat windows from now: its
      // channel has to notice the restart and reconnect (gRPC backs off up
      // to a second) before its heartbeats arrive again.
      const absl::Time now =
          options.clock() + options.heartbeat_period * options.heartbeat_misses;
      for (const v1::MemberRecord& r : state.members()) {
        Member m;
        m.worker_id = r.worker_id();
        m.rank = r.rank();
        m.endpoint = r.endpoint();
        m.node = r.node();
        m.finished = r.finished();
        m.left = r.finished();
        m.instance = r.instance();
        m.incarnation = r.incarnation();
        m.confirmed = false;  // until it heartbeats this coordinator
        m.last_heartbeat = now;
        core->members_[m.worker_id] = m;
      }
      core->phase_ = Phase::kRunning;
      LOG(INFO) << "coordinator: resumed job '" << options.job_id << "' in running generation "
                << state.generation() << " with " << state.members_size()
                << " worker(s), last checkpoint at step " << state.last_checkpoint().step();
    } else {
      LOG(INFO) << "coordinator: resumed job '" << options.job_id << "' after generation "
                << state.generation() << ", last checkpoint at step "
                << state.last_checkpoint().step();
    }
  }
  return core;
}

absl::Status CoordinatorCore::CheckJob(const v1::JobRef& job) const {
  if (!job.job_id().empty() && job.job_id() != options_.job_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this coordinator runs job '", options_.job_id, "', not '", job.job_id(), "'"));
  }
  return absl::OkStatus();
}

absl::Status CoordinatorCore::CheckCurrent(int64_t generation, absl::string_view what) const {
  if (generation != generation_ || phase_ != Phase::kRunning) {
    // ABORTED: the membership changed under the caller (re-join), unlike a
    // configuration error, which is FAILED_PRECONDITION / INVALID_ARGUMENT.
    return absl::AbortedError(absl::StrCat(
        what, " from generation ", generation, " refused: the current generation is ",
        generation_, phase_ == Phase::kRunning ? "" : " (not running)", "; re-join"));
  }
  return absl::OkStatus();
}

int64_t CoordinatorCore::generation() {
  absl::MutexLock lock(&mu_);
  return generation_;
}

int CoordinatorCore::live_workers() {
  absl::MutexLock lock(&mu_);
  if (phase_ != Phase::kRunning) return 0;
  int n = 0;
  for (const auto& [id, m] : members_) n += m.left ? 0 : 1;
  return n;
}

int64_t CoordinatorCore::stalls() {
  absl::MutexLock lock(&mu_);
  return stalls_;
}

int64_t CoordinatorCore::restarts() {
  absl::MutexLock lock(&mu_);
  return restarts_;
}

v1::CoordinatorState CoordinatorCore::StateLocked() const {
  v1::CoordinatorState state;
  state.set_job_id(options_.job_id);
  state.set_generation(generation_);
  *state.mutable_last_checkpoint() = last_checkpoint_;
  for (const v1::CheckpointRecord& e : earlier_checkpoints_) *state.add_earlier_checkpoints() = e;
  state.set_restarts(restarts_);
  state.set_global_batch_size(global_batch_size_);
  state.set_finished(phase_ == Phase::kFinished);
  state.set_running(phase_ == Phase::kRunning);
  if (phase_ == Phase::kRunning) {
    for (const auto& [id, m] : members_) {
      v1::MemberRecord* r = state.add_members();
      r->set_worker_id(id);
      r->set_rank(m.rank);
      *r->mutable_endpoint() = m.endpoint;
      r->set_node(m.node);
      r->set_finished(m.finished);
      r->set_instance(m.instance);
      r->set_incarnation(m.incarnation);
    }
  }
  return state;
}

void CoordinatorCore::Persist() {
  if (options_.state_dir.empty()) return;
  std::string bytes;
  int64_t version;
  {
    absl::MutexLock lock(&mu_);
    version = state_version_;
    StateLocked().SerializeToString(&bytes);
  }
  absl::MutexLock lock(&persist_mu_);
  if (version <= persisted_version_) return;  // a newer snapshot is on disk
  absl::Status s = WriteFileAtomically(StatePath(), bytes);
  if (!s.ok()) {
    LOG(ERROR) << "coordinator: could not persist state: " << s;
    return;
  }
  persisted_version_ = version;
}

}  // namespace tandem
