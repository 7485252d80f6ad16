// CoordinatorCore's membership: joins (rendezvous, incarnations, name
// collisions), generations formed and ended, heartbeats with the batch
// controller's observations, leaves, stop. Failure detection (liveness,
// failure reports, who the rendezvous waits for) is coordinator_liveness.cc.
#include "services/coordinator/coordinator_core.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"

namespace tandem {

absl::Status CoordinatorCore::CheckCollision(const v1::JoinRequest& request) const {
  const std::string& id = request.worker_id();
  if (request.instance().empty()) return absl::OkStatus();
  auto refuse = [&](const std::string& what, const std::string& detail) {
    return absl::AlreadyExistsError(absl::StrCat(
        "join refused: worker id '", id, "' is already ", what, " of job '", options_.job_id,
        "' (another process", detail, "); is a second job running with job id '",
        options_.job_id, "'? Give it another --job_id (or this worker another --worker_id)"));
  };
  auto waiting = pending_.find(id);
  if (waiting != pending_.end() && !waiting->second.instance().empty() &&
      waiting->second.instance() != request.instance()) {
    return refuse("waiting in the rendezvous", "");
  }
  auto it = members_.find(id);
  if (phase_ == Phase::kRunning && it != members_.end()) {
    const Member& m = it->second;
    const absl::Duration silent = options_.clock() - m.last_heartbeat;
    // A restored member that has not heartbeated since is no evidence of a
    // live process: the job was most likely started again.
    if (m.confirmed && !m.left && !m.instance.empty() && m.instance != request.instance() &&
        silent <= Tolerance(m)) {
      return refuse(absl::StrCat("rank ", m.rank),
                    absl::StrCat(", last heartbeat ",
                                 absl::FormatDuration(std::max(silent, absl::ZeroDuration())),
                                 " ago"));
    }
  }
  return absl::OkStatus();
}

bool CoordinatorCore::IsNewIncarnation(const v1::JoinRequest& request) const {
  if (phase_ != Phase::kRunning || request.incarnation().empty() || members_.empty()) {
    return false;
  }
  for (const auto& [id, m] : members_) {
    if (m.confirmed || m.incarnation.empty() || m.incarnation == request.incarnation()) {
      return false;
    }
  }
  return true;
}

bool CoordinatorCore::RendezvousReady(absl::Time now) const {
  const int n = static_cast<int>(pending_.size());
  if (n >= options_.max_workers) return true;
  if (n < options_.min_workers) return false;
  // After a generation ended, nobody else is coming once every member that
  // may still be alive is back: form now rather than after settle_time.
  return EveryLiveMemberRejoined() || now - last_join_ >= options_.settle_time;
}

void CoordinatorCore::FormGeneration() {
  ++generation_;
  ++state_version_;
  // Ranks by (node, worker id): a node's ranks are contiguous, which the
  // hybrid strategy's intra-node groups rely on, and the order is stable.
  std::vector<const v1::JoinRequest*> order;
  for (const auto& [id, req] : pending_) order.push_back(&req);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return std::tie(a->node(), a->worker_id()) < std::tie(b->node(), b->worker_id());
  });
  std::map<std::string, int> per_node;
  for (const auto* req : order) per_node[req->node()]++;
  std::map<std::string, int> seen_on_node;
  members_.clear();
  kv_.clear();
  const absl::Time now = options_.clock();
  const int world = static_cast<int>(order.size());
  for (int rank = 0; rank < world; ++rank) {
    const v1::JoinRequest& req = *order[rank];
    Member m;
    m.worker_id = req.worker_id();
    m.rank = rank;
    m.endpoint = req.endpoint();
    m.node = req.node();
    m.instance = req.instance();
    m.incarnation = req.incarnation();
    m.last_heartbeat = now;
    members_[m.worker_id] = m;
    v1::JoinResponse& r = results_[m.worker_id];
    r.set_generation(generation_);
    r.set_rank(rank);
    r.set_world_size(world);
    r.set_local_rank(seen_on_node[req.node()]++);
    r.set_local_world_size(per_node[req.node()]);
    *r.mutable_resume_from() = last_checkpoint_;
    r.clear_earlier_checkpoints();
    for (const v1::CheckpointRecord& e : earlier_checkpoints_) *r.add_earlier_checkpoints() = e;
    r.set_global_batch_size(global_batch_size_);
    r.set_heartbeat_period_ms(absl::ToInt64Milliseconds(options_.heartbeat_period));
    r.set_heartbeat_misses(options_.heartbeat_misses);
  }
  pending_.clear();
  stragglers_->Reset();
  phase_ = Phase::kRunning;
  end_reason_.clear();
  LOG(INFO) << "coordinator: generation " << generation_ << " formed with " << world
            << " worker(s)";
}

void CoordinatorCore::EndGeneration(const std::string& reason, bool failure) {
  if (phase_ != Phase::kRunning) return;
  phase_ = Phase::kRecovering;
  end_reason_ = reason;
  if (failure) last_failed_generation_ = generation_;
  if (failure) ++restarts_;
  ++state_version_;
  stragglers_->Reset();
  LOG(WARNING) << "coordinator: generation " << generation_ << " ended: " << reason;
}

absl::StatusOr<v1::JoinResponse> CoordinatorCore::Join(const v1::JoinRequest& request,
                                                       absl::Duration timeout) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError("join: worker_id must not be empty");
  }
  const std::string& id = request.worker_id();
  bool ended = false;
  absl::StatusOr<v1::JoinResponse> result;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kFinished) {
      return absl::FailedPreconditionError("join refused: the job has finished");
    }
    if (IsNewIncarnation(request)) {
      // The stored generation's processes belonged to the previous run of
      // the job (interrupted, then started again): not a failure.
      EndGeneration(absl::StrCat("a new run of job '", options_.job_id, "' started (worker ", id,
                                 "); the generation restored from the state directory "
                                 "belonged to the previous run"),
                    false);
      ended = true;
    }
    RETURN_IF_ERROR(CheckCollision(request));
    if (phase_ == Phase::kRunning) {
      auto it = members_.find(id);
      if (it != members_.end()) {
        EndGeneration(absl::StrCat("rank ", it->second.rank, " (", id, ") re-joined"), true);
      } else if (static_cast<int>(members_.size()) < options_.max_workers) {
        EndGeneration(absl::StrCat("worker ", id, " joined; growing the job"), false);
      } else {
        return absl::ResourceExhaustedError(absl::StrCat(
            "join refused: the job already runs max_workers = ", options_.max_workers));
      }
      ended = true;
    }
    pending_[id] = request;
    results_.erase(id);
    last_join_ = absl::Now();
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      auto got = results_.find(id);
      if (got != results_.end()) {
        result = got->second;
        results_.erase(got);
        break;
      }
      if (pending_.count(id) == 0) {
        result = absl::AbortedError("join: removed from the rendezvous (job finished or stopped)");
        break;
      }
      const absl::Time now = absl::Now();
      if (RendezvousReady(now)) {
        FormGeneration();
        ended = true;  // persist the new generation number
        continue;
      }
      if (now >= deadline) {
        const int n = static_cast<int>(pending_.size());
        pending_.erase(id);
        result = absl::DeadlineExceededError(absl::StrCat(
            "rendezvous did not complete in time: ", n, " worker(s) joined, min_workers is ",
            options_.min_workers, "; start more workers or lower --min_workers"));
        break;
      }
      absl::Time wake = deadline;
      if (static_cast<int>(pending_.size()) >= options_.min_workers) {
        wake = std::min(wake, last_join_ + options_.settle_time);
      }
      auto answered = [this, &id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        const int n = static_cast<int>(pending_.size());
        return results_.count(id) > 0 || pending_.count(id) == 0 || n >= options_.max_workers ||
               (n >= options_.min_workers && EveryLiveMemberRejoined());
      };
      mu_.AwaitWithDeadline(absl::Condition(&answered), wake);
    }
  }
  if (ended) Persist();
  return result;
}

void CoordinatorCore::ObserveBatch(const v1::WorkerProgress& p) {
  // One observation per progress window (heartbeats repeat the last one).
  if (p.global_batch() <= 0 || p.step() == batch_reported_step_) return;
  batch_reported_step_ = p.step();
  if (batch_controller_ == nullptr) {
    BatchControllerOptions o = options_.batch_auto;
    if (o.reference_batch <= 0) o.reference_batch = p.global_batch();
    batch_controller_ = std::make_unique<BatchController>(o);
  }
  BatchObservation ob;
  ob.global_batch = p.global_batch();
  ob.local_batch = p.local_batch();
  ob.samples_per_second = p.samples_per_second();
  ob.local_grad_sq = p.local_grad_sq();
  ob.global_grad_sq = p.global_grad_sq();
  batch_controller_->Observe(ob);
  const int world = std::max(1, static_cast<int>(members_.size()));
  const FittedThroughput model = batch_controller_->Fitted();
  const BatchDecision d = batch_controller_->Decide(model, world);
  batch_decision_ = d;
  if (!d.changed || d.global_batch == global_batch_size_) return;
  const BatchDecision now = [&] {
    BatchDecision x;
    x.global_batch = p.global_batch();
    x.throughput = model.SamplesPerSecond(x.global_batch);
    x.efficiency = batch_controller_->efficiency(x.global_batch);
    x.goodput = x.throughput * x.efficiency;
    return x;
  }();
  batch_reason_ = absl::StrFormat(
      "noise scale %.0f, efficiency %.3f, goodput %.0f samples/s predicted at %d vs %.0f at %d",
      d.noise_scale, d.efficiency, d.goodput, static_cast<long long>(d.global_batch), now.goodput,
      static_cast<long long>(now.global_batch));
  global_batch_size_ = d.global_batch;
  ++state_version_;
  LOG(INFO) << "coordinator: global batch " << now.global_batch << " -> " << d.global_batch
            << ": " << batch_reason_;
}

BatchDecision CoordinatorCore::batch_decision() {
  absl::MutexLock lock(&mu_);
  return batch_decision_;
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorCore::Heartbeat(
    const v1::HeartbeatRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  absl::MutexLock lock(&mu_);
  v1::HeartbeatResponse reply;
  reply.set_generation(generation_);
  if (phase_ == Phase::kFinished) {
    reply.set_command(v1::HeartbeatResponse::STOP);
    reply.set_reason("the job has finished");
    return reply;
  }
  auto it = members_.find(request.worker_id());
  if (request.generation() != generation_ || phase_ != Phase::kRunning || it == members_.end()) {
    reply.set_command(v1::HeartbeatResponse::REJOIN);
    // Collectives of a generation that failed, or of one already replaced,
    // can only hang or fail: the worker aborts them now.
    // (A worker of an older generation is left out of the current one:
    // its collectives can no longer complete either.)
    reply.set_failure(request.generation() < generation_ ||
                      request.generation() <= last_failed_generation_);
    if (request.generation() > generation_) {
      reply.set_reason(absl::StrCat("generation ", request.generation(),
                                    " is unknown to this coordinator (restarted?)"));
    } else if (!end_reason_.empty() && request.generation() == generation_) {
      reply.set_reason(end_reason_);
    } else {
      reply.set_reason(absl::StrCat("generation ", request.generation(),
                                    " is over; the current generation is ", generation_));
    }
    return reply;
  }
  Member& m = it->second;
  m.last_heartbeat = options_.clock();
  m.confirmed = true;
  m.progress = request.progress();
  if (auto e = stragglers_->Report(m.rank, m.worker_id, request.timing())) {
    LOG(WARNING) << "coordinator: " << e->line;
  }
  if (options_.batch_auto.max_global_batch > 0) {
    if (m.rank == 0) ObserveBatch(m.progress);
    reply.set_global_batch_size(global_batch_size_);
    reply.set_batch_reason(batch_reason_);
  }
  if (stop_requested_) {
    reply.set_command(v1::HeartbeatResponse::STOP);
    reply.set_reason(end_reason_.empty() ? "stop requested" : end_reason_);
    return reply;
  }
  reply.set_command(v1::HeartbeatResponse::CONTINUE);
  return reply;
}

absl::Status CoordinatorCore::Leave(const v1::LeaveRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  {
    absl::MutexLock lock(&mu_);
    pending_.erase(request.worker_id());
    auto it = members_.find(request.worker_id());
    if (it == members_.end() || request.generation() != generation_) return absl::OkStatus();
    Member& m = it->second;
    m.left = true;
    m.finished = request.finished();
    ++state_version_;  // a restarted coordinator must know who finished
    if (!request.finished()) {
      EndGeneration(absl::StrCat("rank ", m.rank, " (", m.worker_id, ") left"), false);
    } else {
      bool all = std::all_of(members_.begin(), members_.end(),
                             [](const auto& kv) { return kv.second.finished; });
      if (all && phase_ == Phase::kRunning) {
        phase_ = Phase::kFinished;
        end_reason_ = "the job has finished";
        ++state_version_;
        LOG(INFO) << "coordinator: job '" << options_.job_id << "' finished";
      }
    }
  }
  Persist();
  return absl::OkStatus();
}

void CoordinatorCore::RequestStop(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  stop_requested_ = true;
  end_reason_ = reason;
  pending_.clear();  // wakes waiting joiners with ABORTED
}

}  // namespace tandem
