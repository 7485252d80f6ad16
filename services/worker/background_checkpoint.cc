#include "services/worker/background_checkpoint.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

#include "absl/time/clock.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {

absl::StatusOr<std::unique_ptr<CheckpointMetrics>> CheckpointMetrics::Create(Metrics* m) {
  std::unique_ptr<CheckpointMetrics> c(new CheckpointMetrics());
  ASSIGN_OR_RETURN(c->write_seconds_,
                   m->Histogram("tandem_checkpoint_write_seconds",
                                "Seconds to write, fsync and commit one checkpoint this rank "
                                "wrote (on the writer thread when in the background).",
                                Metrics::LatencyBuckets()));
  ASSIGN_OR_RETURN(c->snapshot_bytes_,
                   m->Gauge("tandem_checkpoint_snapshot_bytes",
                            "Host bytes of the background checkpoint snapshot (one at a time)."));
  ASSIGN_OR_RETURN(c->waits_, m->Counter("tandem_checkpoint_waits_total",
                                         "Checkpoint steps that waited for the previous "
                                         "background write to finish."));
  ASSIGN_OR_RETURN(c->wait_seconds_,
                   m->Counter("tandem_checkpoint_wait_seconds_total",
                              "Seconds checkpoint steps waited for the previous background write."));
  ASSIGN_OR_RETURN(c->failures_,
                   m->Counter("tandem_checkpoint_failures_total",
                              "Background checkpoints that were not committed (write or commit "
                              "failed; the previous committed checkpoint stays)."));
  return c;
}

void CheckpointMetrics::RecordWrite(double seconds, int64_t snapshot_bytes) {
  write_seconds_->Observe(seconds);
  if (snapshot_bytes >= 0) snapshot_bytes_->Set(static_cast<double>(snapshot_bytes));
}

void CheckpointMetrics::RecordWait(double seconds) {
  waits_->Increment();
  wait_seconds_->Increment(seconds);
}

void CheckpointMetrics::RecordFailure() { failures_->Increment(); }

BackgroundCheckpointWriter::BackgroundCheckpointWriter(BackgroundCheckpointOptions options,
                                                       CommitFn commit)
    : o_(std::move(options)), commit_(std::move(commit)) {
  thread_ = std::thread([this] { Loop(); });
}

BackgroundCheckpointWriter::~BackgroundCheckpointWriter() {
  {
    absl::MutexLock lock(&mu_);
    AwaitIdle();
    quit_ = true;
  }
  thread_.join();
}

CheckpointSnapshot* BackgroundCheckpointWriter::Acquire() {
  const absl::Time start = absl::Now();
  bool waited = false;
  {
    absl::MutexLock lock(&mu_);
    waited = busy_;
    AwaitIdle();
  }
  if (waited && o_.metrics != nullptr) {
    o_.metrics->RecordWait(absl::ToDoubleSeconds(absl::Now() - start));
  }
  return &snapshot_;
}

void BackgroundCheckpointWriter::Submit(std::string path, v1::CheckpointRecord record,
                                        CommitTarget target,
                                        std::function<absl::Status()> after_write) {
  Start(Job{nullptr, std::move(after_write), std::move(path), std::move(record), target});
}

void BackgroundCheckpointWriter::SubmitTask(std::function<absl::Status()> write, std::string path,
                                            v1::CheckpointRecord record, CommitTarget target) {
  Start(Job{std::move(write), nullptr, std::move(path), std::move(record), target});
}

void BackgroundCheckpointWriter::Start(Job job) {
  absl::MutexLock lock(&mu_);
  DCHECK(!busy_);
  job_ = std::move(job);
  busy_ = true;
}

BackgroundCheckpointWriter::Outcome BackgroundCheckpointWriter::Drain() {
  absl::MutexLock lock(&mu_);
  AwaitIdle();
  return last_;
}

void BackgroundCheckpointWriter::AwaitIdle() {
  if (!busy_) return;
  // Someone waits for this write now: it is no longer idle-time work.
  waiter_ = true;
  RaisePriority();
  mu_.Await(absl::Condition(this, &BackgroundCheckpointWriter::Idle));
  waiter_ = false;
}

int64_t BackgroundCheckpointWriter::in_flight_step() const {
  absl::MutexLock lock(&mu_);
  return busy_ ? job_.record.step() : -1;
}

// Below the training threads: checksumming the snapshot and writing it
// take CPU, and on a machine whose cores training fills the write should
// use what is left rather than slow the step (Linux: per-thread nice, then
// SCHED_IDLE). Failure to lower it only costs speed.
void BackgroundCheckpointWriter::LowerPriority() {
  absl::MutexLock lock(&mu_);
  if (!can_idle_ || idle_ || waiter_) return;  // a waiter keeps it raised
  sched_param p{};
  idle_ = sched_setscheduler(tid_, SCHED_IDLE, &p) == 0;
}

// SCHED_IDLE back to SCHED_OTHER (at the nice value the thread already
// has, which needs no privilege): the trainer waits for this write.
void BackgroundCheckpointWriter::RaisePriority() {
  if (!idle_) return;
  sched_param p{};
  if (sched_setscheduler(tid_, SCHED_OTHER, &p) == 0) idle_ = false;
}

namespace {

// Whether a thread at `nice` may go to SCHED_IDLE and come back: leaving
// SCHED_IDLE needs CAP_SYS_NICE or an RLIMIT_NICE that allows `nice`, and
// a writer that could not be raised again when the trainer waits for it
// could starve on a machine with no idle CPU. Tried on a throwaway thread.
bool CanLeaveIdle(int nice) {
  bool ok = false;
  std::thread([&ok, nice] {
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
    sched_param p{};
    ok = sched_setscheduler(0, SCHED_IDLE, &p) == 0 && sched_setscheduler(0, SCHED_OTHER, &p) == 0;
  }).join();
  return ok;
}

}  // namespace

void BackgroundCheckpointWriter::Loop() {
  (void)pthread_setname_np(pthread_self(), "ckpt-writer");  // for top -H, perf
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(tid), o_.nice);
  const bool can_idle = o_.idle_priority && CanLeaveIdle(o_.nice);
  {
    absl::MutexLock lock(&mu_);
    tid_ = tid;
    can_idle_ = can_idle;
  }
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BackgroundCheckpointWriter::HasWorkOrQuit));
      if (quit_ && !busy_) return;
      job = job_;  // the snapshot stays ours until busy_ is cleared
    }
    LowerPriority();  // again: a wait for the previous write may have raised it
    const absl::Time start = absl::Now();
    absl::Status s = Write(job);
    if (o_.metrics != nullptr) {
      if (s.ok()) {
        o_.metrics->RecordWrite(absl::ToDoubleSeconds(absl::Now() - start),
                                job.write ? -1 : snapshot_.bytes());
      } else {
        o_.metrics->RecordFailure();
      }
    }
    if (!s.ok()) {
      LOG(WARNING) << "background checkpoint at step " << job.record.step() << " (" << job.path
                   << ") was not committed: " << s.message()
                   << "; the previous committed checkpoint stays the one to resume from";
    }
    absl::MutexLock lock(&mu_);
    last_ = Outcome{job.record.step(), job.path, s};
    busy_ = false;
  }
}

absl::Status BackgroundCheckpointWriter::Write(const Job& job) {
  if (job.write) {
    RETURN_IF_ERROR(job.write());
  } else {
    checkpoint::ImageWriteOptions wo;
    wo.write = o_.write;
    wo.direct = o_.direct_io;
    RETURN_IF_ERROR(snapshot_.Write(job.path, wo));
  }
  if (job.after_write) RETURN_IF_ERROR(job.after_write());
  return commit_(job.record, job.target);
}

}  // namespace worker
}  // namespace tandem
