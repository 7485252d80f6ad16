// CoordinatorCore's shared records: the key-value store workers rendezvous
// through, checkpoint commits, the job status and shard-server reports.
#include "services/coordinator/coordinator_core.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace tandem {

absl::Status CoordinatorCore::KvSet(const v1::KvSetRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckCurrent(request.generation(), "KvSet"));
  kv_[request.key()] = request.value();
  return absl::OkStatus();
}

absl::StatusOr<v1::KvGetResponse> CoordinatorCore::KvGet(const v1::KvGetRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  const absl::Time deadline = absl::Now() + absl::Milliseconds(request.timeout_ms());
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckCurrent(request.generation(), "KvGet"));
  const int64_t generation = generation_;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (generation_ != generation || phase_ != Phase::kRunning) return true;
    for (const std::string& k : request.keys()) {
      if (kv_.count(k) == 0) return false;
    }
    return true;
  };
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  RETURN_IF_ERROR(CheckCurrent(request.generation(), "KvGet"));
  v1::KvGetResponse reply;
  for (const std::string& k : request.keys()) {
    auto it = kv_.find(k);
    if (it == kv_.end()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "KvGet: key '", k, "' not set within ", request.timeout_ms(), " ms"));
    }
    reply.add_values(it->second);
  }
  return reply;
}

absl::StatusOr<int64_t> CoordinatorCore::KvAdd(const v1::KvAddRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckCurrent(request.generation(), "KvAdd"));
  std::string& slot = kv_[request.key()];
  int64_t value = 0;
  if (!slot.empty() && !absl::SimpleAtoi(slot, &value)) {
    return absl::FailedPreconditionError(
        absl::StrCat("KvAdd: key '", request.key(), "' holds a non-integer value"));
  }
  value += request.delta();
  slot = absl::StrCat(value);
  return value;
}

absl::Status CoordinatorCore::CommitCheckpoint(const v1::CommitCheckpointRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  if (request.checkpoint().path().empty()) {
    return absl::InvalidArgumentError("CommitCheckpoint: the checkpoint path is empty");
  }
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckCurrent(request.generation(), "CommitCheckpoint"));
    if (request.checkpoint().step() < last_checkpoint_.step()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CommitCheckpoint: step ", request.checkpoint().step(),
          " is older than the committed step ", last_checkpoint_.step()));
    }
    if (request.shards() == 0) {
      RecordCheckpoint(request.checkpoint());
    } else {
      // One shard of a background sharded checkpoint: it counts once all are in.
      shard_commits_.Prune(generation_, last_checkpoint_.step());
      ASSIGN_OR_RETURN(std::optional<v1::CheckpointRecord> done,
                       shard_commits_.Add(generation_, request.checkpoint(), request.shard(),
                                          request.shards()));
      if (!done.has_value()) return absl::OkStatus();
      RecordCheckpoint(*done);
    }
  }
  Persist();
  return absl::OkStatus();
}

void CoordinatorCore::RecordCheckpoint(const v1::CheckpointRecord& record) {
  if (!last_checkpoint_.path().empty() && last_checkpoint_.path() != record.path()) {
    earlier_checkpoints_.insert(earlier_checkpoints_.begin(), last_checkpoint_);
    if (static_cast<int>(earlier_checkpoints_.size()) > kEarlierCheckpoints) {
      earlier_checkpoints_.resize(kEarlierCheckpoints);
    }
  }
  last_checkpoint_ = record;
  ++state_version_;
}

v1::GetJobStatusResponse CoordinatorCore::GetJobStatus() {
  absl::MutexLock lock(&mu_);
  v1::GetJobStatusResponse s;
  switch (phase_) {
    case Phase::kWaiting: s.set_state(v1::GetJobStatusResponse::WAITING); break;
    case Phase::kRunning: s.set_state(v1::GetJobStatusResponse::RUNNING); break;
    case Phase::kRecovering: s.set_state(v1::GetJobStatusResponse::RECOVERING); break;
    case Phase::kFinished: s.set_state(v1::GetJobStatusResponse::FINISHED); break;
  }
  s.set_generation(generation_);
  s.set_world_size(phase_ == Phase::kRunning ? static_cast<int>(members_.size()) : 0);
  std::vector<const Member*> by_rank;
  for (const auto& [id, m] : members_) by_rank.push_back(&m);
  std::sort(by_rank.begin(), by_rank.end(),
            [](const Member* a, const Member* b) { return a->rank < b->rank; });
  for (const Member* m : by_rank) {
    v1::WorkerStatus* w = s.add_workers();
    w->set_worker_id(m->worker_id);
    w->set_rank(m->rank);
    *w->mutable_endpoint() = m->endpoint;
    *w->mutable_progress() = m->progress;
    w->set_last_heartbeat_unix_millis(absl::ToUnixMillis(m->last_heartbeat));
  }
  *s.mutable_last_checkpoint() = last_checkpoint_;
  s.set_global_batch_size(global_batch_size_);
  s.set_restarts(restarts_);
  for (const v1::LostWorker& l : lost_) *s.add_lost() = l;
  for (const auto& [id, server] : shard_servers_) *s.add_shard_servers() = server;
  for (const v1::Straggler& x : stragglers_->Named()) *s.add_stragglers() = x;
  if (phase_ == Phase::kWaiting || phase_ == Phase::kRecovering) {
    s.set_message(absl::StrCat(pending_.size(), " of min ", options_.min_workers,
                               " worker(s) waiting to join",
                               end_reason_.empty() ? "" : "; last generation ended: ",
                               end_reason_));
  } else {
    s.set_message(end_reason_);
  }
  return s;
}

absl::Status CoordinatorCore::ReportShardServer(const v1::ReportShardServerRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  const v1::ShardServerStatus& r = request.server();
  if (r.server_id().empty() || r.address().empty()) {
    return absl::InvalidArgumentError(
        "ReportShardServer: server_id and address are required (shardserver --server_id)");
  }
  absl::MutexLock lock(&mu_);
  if (shard_servers_.count(r.server_id()) == 0 &&
      shard_servers_.size() >= static_cast<size_t>(kMaxShardServers)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ReportShardServer: already ", kMaxShardServers, " shard servers reported; '",
        r.server_id(), "' not recorded"));
  }
  v1::ShardServerStatus& kept = shard_servers_[r.server_id()];
  kept = r;
  kept.set_last_report_unix_millis(absl::ToUnixMillis(options_.clock()));
  return absl::OkStatus();
}

}  // namespace tandem
