// CoordinatorCore's failure detection: members silent past their tolerance
// (missed heartbeats), failed collectives reported by a rank (a peer seen
// to exit among them, or accused), attachments that closed (a process
// gone), and whom the rendezvous after a failure still waits for. See
// "Failure detection" in coordinator_core.h.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "services/coordinator/coordinator_core.h"

namespace tandem {

absl::Duration CoordinatorCore::Tolerance(const Member& m) const {
  const absl::Duration beats = options_.heartbeat_period * options_.heartbeat_misses;
  const double step = m.progress.step_seconds();
  if (options_.step_time_factor <= 0 || !(step > 0)) return beats;
  return std::max(beats, absl::Seconds(options_.step_time_factor * std::min(step, 3600.0)));
}

void CoordinatorCore::Expel(Member& m, const std::string& reason) {
  m.gone = true;
  v1::LostWorker lost;
  lost.set_worker_id(m.worker_id);
  lost.set_rank(m.rank);
  lost.set_generation(generation_);
  lost.set_reason(reason);
  lost.set_unix_millis(absl::ToUnixMillis(absl::Now()));
  lost_.push_back(lost);
  if (static_cast<int>(lost_.size()) > kMaxLost) lost_.erase(lost_.begin());
}

bool CoordinatorCore::EveryLiveMemberRejoined() const {
  if (phase_ != Phase::kRecovering || members_.empty()) return false;
  for (const auto& [id, m] : members_) {
    if (!m.left && !m.gone && pending_.count(id) == 0) return false;
  }
  return true;
}

absl::StatusOr<v1::ReportFailureResponse> CoordinatorCore::ReportFailure(
    const v1::ReportFailureRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  v1::ReportFailureResponse reply;
  {
    absl::MutexLock lock(&mu_);
    std::string reason = absl::StrCat("rank ", request.rank(), " reported that ",
                                      request.operation(), " failed");
    if (request.peer_rank() >= 0) absl::StrAppend(&reason, " (peer rank ", request.peer_rank(), ")");
    if (!request.message().empty()) absl::StrAppend(&reason, ": ", request.message());
    Member* exited = nullptr;
    Member* accused = nullptr;
    if (request.generation() == generation_ && phase_ != Phase::kFinished &&
        request.peer_rank() != request.rank()) {
      for (auto& [id, m] : members_) {
        if (m.rank != request.peer_rank() || m.left || m.gone) continue;
        (request.peer_exited() ? exited : accused) = &m;
      }
    }
    if (accused != nullptr && accused->accused_by < 0) {
      // An accusation only: the peer's connection broke, which a slow peer
      // can cause too. It counts once the accused's own attachment to this
      // coordinator is closed as well (ConfirmDetached).
      accused->accused_by = request.rank();
      accused->accusation = absl::StrCat(request.operation(), " failed");
      ConfirmDetached(options_.clock());
    }
    if (exited != nullptr) {
      // The reporter saw the process gone (not merely slow): name it, and
      // let the rendezvous go on without it (EveryLiveMemberRejoined). Not
      // listed in lost_: that list is for a supervisor to kill (expelled,
      // maybe hung); this process is gone already.
      reason = absl::StrCat("rank ", exited->rank, " (", exited->worker_id, ") exited (seen by rank ",
                            request.rank(), ": ", request.operation(), " failed)");
      exited->gone = true;
    }
    if (request.generation() == generation_ && phase_ == Phase::kRunning) {
      EndGeneration(reason, true);
    } else if (request.generation() == generation_ && phase_ == Phase::kRecovering) {
      // It ended already (a planned resize, or another rank's report), but
      // a rank failed in it: the peers still in its collectives must abort
      // them (HeartbeatResponse.failure).
      last_failed_generation_ = generation_;
      if (exited != nullptr) {
        // The more specific cause, for the survivors' messages from here on.
        end_reason_ = reason;
        LOG(WARNING) << "coordinator: " << reason;
      }
    }
    // A member whose attachment closed before this report is gone now that
    // its generation failed.
    if (request.generation() == generation_) ConfirmDetached(options_.clock());
    reply.set_generation(generation_);
  }
  Persist();
  return reply;
}

absl::StatusOr<int64_t> CoordinatorCore::Attach(const v1::AttachRequest& request) {
  RETURN_IF_ERROR(CheckJob(request.job()));
  if (request.worker_id().empty() || request.instance().empty()) {
    return absl::InvalidArgumentError(
        "attach: worker_id and instance must not be empty (send JoinRequest.instance)");
  }
  absl::MutexLock lock(&mu_);
  Attachment& a = attachments_[request.worker_id()];
  if (a.instance != request.instance()) a = Attachment{request.instance()};
  ++a.open;
  return generation_;
}

void CoordinatorCore::Detach(const v1::AttachRequest& request) {
  bool confirmed = false;
  {
    absl::MutexLock lock(&mu_);
    auto a = attachments_.find(request.worker_id());
    // A newer process of this worker id attached since: not its call.
    if (a == attachments_.end() || a->second.instance != request.instance()) return;
    if (--a->second.open > 0) return;
    a->second.closed_at = options_.clock();
    // A joiner's Join came over the same connection: it is not coming.
    auto waiting = pending_.find(request.worker_id());
    if (waiting != pending_.end() && waiting->second.instance() == request.instance()) {
      pending_.erase(waiting);
    }
    confirmed = ConfirmDetached(options_.clock());
  }
  if (confirmed) Persist();
}

bool CoordinatorCore::ConfirmDetached(absl::Time now) {
  if (phase_ != Phase::kRunning && phase_ != Phase::kRecovering) return false;
  bool confirmed = false;
  for (auto& [id, m] : members_) {
    if (m.left || m.gone || m.instance.empty()) continue;
    auto a = attachments_.find(id);
    if (a == attachments_.end() || a->second.instance != m.instance || a->second.open > 0 ||
        a->second.closed_at == absl::InfinitePast()) {
      continue;
    }
    // Two signs that agree (a peer's broken connection or a failed
    // generation, and this one's closed attachment) confirm at once; a
    // closed attachment alone after detach_grace (a re-attach after a
    // transient disconnect comes within milliseconds).
    const bool failed = phase_ == Phase::kRecovering && last_failed_generation_ == generation_;
    const absl::Duration closed = now - a->second.closed_at;
    if (m.accused_by < 0 && !failed && closed < options_.detach_grace) continue;
    const std::string how =
        m.accused_by >= 0 ? absl::StrCat("; rank ", m.accused_by, " reported: ", m.accusation)
        : failed          ? std::string("; its generation had failed")
                          : absl::StrCat(" ", absl::FormatDuration(closed), " ago");
    const std::string reason = absl::StrCat("rank ", m.rank, " (", id, ") exited (confirmed: its ",
                                            "connection to the coordinator closed", how, ")");
    m.gone = true;
    confirmed = true;
    if (phase_ == Phase::kRunning) {
      EndGeneration(reason, true);
    } else {
      last_failed_generation_ = generation_;
      end_reason_ = reason;
      LOG(WARNING) << "coordinator: " << reason;
    }
  }
  return confirmed;
}

bool CoordinatorCore::CheckLiveness() {
  bool ended = false;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = options_.clock();
    const absl::Time previous = last_liveness_check_;
    last_liveness_check_ = now;
    ended = ConfirmDetached(now);
    if (phase_ != Phase::kRunning) {
      // Ended just now (persisted below), or nobody's silence counts.
    } else if (options_.stall_gap > absl::ZeroDuration() && previous != absl::InfinitePast() &&
        now - previous >= options_.stall_gap) {
      // This loop was not scheduled: whatever silence it sees now is (at
      // least partly) its own. Nobody is blamed; every member's silence
      // counts again from now.
      for (auto& [id, m] : members_) m.last_heartbeat = std::max(m.last_heartbeat, now);
      ++stalls_;
      LOG(WARNING) << "coordinator: no liveness check for "
                   << absl::FormatDuration(now - previous)
                   << " (this process was stopped or starved); every worker gets a fresh "
                      "heartbeat tolerance";
    } else {
      ended = ExpelSilent(now);
    }
  }
  if (ended) Persist();
  return ended;
}

bool CoordinatorCore::ExpelSilent(absl::Time now) {
  for (auto& [id, m] : members_) {
    if (m.left) continue;
    const absl::Duration limit = Tolerance(m);
    if (now - m.last_heartbeat <= limit) continue;
    const absl::Duration beats = options_.heartbeat_period * options_.heartbeat_misses;
    const std::string reason = absl::StrCat(
        "rank ", m.rank, " (", id, ") missed ", options_.heartbeat_misses,
        " heartbeats (silent for ", absl::FormatDuration(now - m.last_heartbeat),
        limit > beats
            ? absl::StrCat("; tolerance ", absl::FormatDuration(limit), " for its step time")
            : std::string(),
        ")");
    Expel(m, reason);
    EndGeneration(reason, true);
    return true;
  }
  return false;
}

}  // namespace tandem
