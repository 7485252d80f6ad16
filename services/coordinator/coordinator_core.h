// CoordinatorCore: the job's membership and control state, without gRPC.
//
// It runs the rendezvous (min/max workers and a settle time; dense ranks
// 0..N-1 assigned once per *generation*), tracks heartbeats and ends a
// generation when a member misses `heartbeat_misses` periods, reports a
// failed collective, or the membership changes; serves the generation-scoped
// key-value store that bootstraps Gloo and NCCL; records committed
// checkpoints; and persists what must survive a coordinator restart
// (generation counter, last checkpoint, restarts, and the running
// generation's members) to `state_dir` atomically: a coordinator restarted
// from it resumes the running generation, so its workers train on through
// the restart (their heartbeats count from the restart). A restored member
// counts as live only once it has heartbeated this coordinator: until then
// a new process of its worker id is the job started again, not a duplicate.
// A worker that joins with another job incarnation (JoinRequest.incarnation)
// than the restored members' ends the restored generation as "a new run of
// the job" (not a failure); the new generation resumes from the last
// committed checkpoint.
//
// Failure detection blames the right process: a member is silent when no
// heartbeat came for its tolerance, max(heartbeat_period x heartbeat_misses,
// step_time_factor x its reported step time). When CheckLiveness itself was
// not called for `stall_gap` (this process was stopped or starved: the
// silence was its own), every member gets a fresh tolerance instead. A rank
// that reports a failed collective ends the generation at once; when it
// also saw the peer's process exit (ReportFailureRequest.peer_exited: the
// shm transport checks the pid), that member counts as gone at once, without
// waiting for its heartbeats. A report without that evidence removes
// nobody by itself: a slow-but-alive rank stays expected in the next
// rendezvous.
//
// Confirmed deaths off shared memory (Gloo TCP, other hosts): each worker
// process holds a Coordinator.Attach call open for its life (Attach /
// Detach here); the call ends when the process's connection closes, which
// a stopped or slow process never causes. A member whose attachment closed
// is gone at once when a peer named it in a failure report or its
// generation already ended by a failure (two independent signs), and after
// `detach_grace` without re-attaching otherwise (a dead worker that no
// collective waited on). The reason says how it was confirmed ("rank 1
// (w1) exited (confirmed: its connection to the coordinator closed; ...)").
// A joiner whose attachment closed leaves the rendezvous.
//
// The rendezvous after a generation ended forms as soon as every member of
// that generation that may still be alive (not expelled, not seen to exit,
// not left) has joined again and min_workers are there, instead of waiting
// settle_time after the last join; while one is still missing the
// settle_time rule holds (and max_workers forms at once).
//
// The step times heartbeats carry (HeartbeatRequest.timing) feed a
// StragglerDetector (straggler_detector.h): a named rank is logged and
// listed in GetJobStatus (`stragglers`).
//
// Workers expelled for missing heartbeats are listed in GetJobStatus
// (`lost`), for a supervisor that kills them; a REJOIN after a failure says
// so (HeartbeatResponse.failure) so survivors abort their collectives.
//
// Requests from a worker of an older generation are refused
// (ABORTED: the membership changed), its heartbeats are answered with REJOIN.
//
// Thread-safe: every method may be called from any gRPC thread. Join and
// KvGet block (up to a timeout) until their condition holds. Liveness is
// checked only when CheckLiveness() is called (by CoordinatorServer's
// background thread, or by hand in tests), against `options.clock`.
#ifndef TANDEM_SERVICES_COORDINATOR_COORDINATOR_CORE_H_
#define TANDEM_SERVICES_COORDINATOR_COORDINATOR_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"
#include "services/coordinator/batch_controller.h"
#include "services/coordinator/shard_commits.h"
#include "services/coordinator/straggler_detector.h"

namespace tandem {

struct CoordinatorOptions {
  std::string job_id = "tandem";
  // A generation forms once min_workers joined and no one joined for
  // settle_time, or at once when max_workers joined.
  int min_workers = 1;
  int max_workers = 1;
  absl::Duration settle_time = absl::Seconds(1);
  // Workers heartbeat every period; missing `heartbeat_misses` in a row
  // ends the generation.
  absl::Duration heartbeat_period = absl::Seconds(1);
  int heartbeat_misses = 3;
  // A member's tolerance grows to this many times the step time it reports
  // (a loaded machine slows its heartbeats as much as its steps); 0 = off.
  double step_time_factor = 5;
  // A member whose Coordinator.Attach call ended and was not re-opened for
  // this long is gone even when nobody reported it (a peer's report, or a
  // failed generation, makes it gone at once). Checked by CheckLiveness.
  absl::Duration detach_grace = absl::Milliseconds(500);
  // Two CheckLiveness calls this far apart mean the coordinator itself was
  // not running: nobody is blamed, every member's silence restarts from
  // now. 0 = off (tests that call CheckLiveness by hand); CoordinatorServer
  // sets it to the heartbeat period (four of its liveness ticks).
  absl::Duration stall_gap = absl::ZeroDuration();
  // Where the durable state lives; empty = nothing persisted.
  std::string state_dir;
  // Global batch size handed to each generation (0 = workers decide).
  int64_t global_batch_size = 0;
  // Dynamic batch sizing (--batch_auto MIN,MAX; max_global_batch 0 = off):
  // rank 0's progress reports feed a BatchController; its goodput-maximising
  // global batch (samples per optimizer step) goes out in every heartbeat
  // reply and join. reference_batch 0 = the first batch reported.
  BatchControllerOptions batch_auto{.min_global_batch = 0, .max_global_batch = 0,
                                    .reference_batch = 0};
  // Straggler detection from the step times in heartbeats
  // (--straggler_threshold, --straggler_window); its clock is `clock`.
  StragglerOptions straggler;
  // Time source for liveness; tests substitute a manual clock.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

// Validates options: a message that says which value to fix.
absl::Status ValidateCoordinatorOptions(const CoordinatorOptions& options);

class CoordinatorCore {
 public:
  // Loads <state_dir>/coordinator_state.pb when present (a restart), so
  // generation numbers keep growing and the last checkpoint is remembered.
  static absl::StatusOr<std::unique_ptr<CoordinatorCore>> Create(const CoordinatorOptions& options);

  CoordinatorCore(const CoordinatorCore&) = delete;
  CoordinatorCore& operator=(const CoordinatorCore&) = delete;

  // Blocks until the worker is given a rank in a new generation, or timeout.
  absl::StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request, absl::Duration timeout);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::ReportFailureResponse> ReportFailure(const v1::ReportFailureRequest& request);
  absl::Status Leave(const v1::LeaveRequest& request);

  absl::Status KvSet(const v1::KvSetRequest& request);
  absl::StatusOr<v1::KvGetResponse> KvGet(const v1::KvGetRequest& request);
  absl::StatusOr<int64_t> KvAdd(const v1::KvAddRequest& request);

  // Records the checkpoint (ABORTED for an ended generation, FAILED_PRECONDITION
  // for a step older than the committed one); a request with shards > 0 is
  // one rank's shard and records the step once all its shards arrived
  // (shard_commits.h).
  absl::Status CommitCheckpoint(const v1::CommitCheckpointRequest& request);
  v1::GetJobStatusResponse GetJobStatus();
  // Keeps the latest report per server_id (stamped with options.clock) for
  // GetJobStatus; not persisted (servers report again). INVALID_ARGUMENT
  // without a server_id or address; at most kMaxShardServers servers.
  absl::Status ReportShardServer(const v1::ReportShardServerRequest& request);

  // Coordinator.Attach: `request.instance` of `request.worker_id` opened
  // its attachment (Attach; the generation current now) or the call ended
  // (Detach). INVALID_ARGUMENT without worker id or instance.
  absl::StatusOr<int64_t> Attach(const v1::AttachRequest& request);
  void Detach(const v1::AttachRequest& request);

  // Ends the current generation if a member has been silent too long (or
  // its attachment closed detach_grace ago).
  // Returns true when it did.
  bool CheckLiveness();
  // Asks every worker to stop at its next heartbeat (Ctrl-C of `tandem local`).
  void RequestStop(const std::string& reason);

  int64_t generation();
  int live_workers();
  int64_t restarts();
  // How often CheckLiveness found a gap of stall_gap in its own calls.
  int64_t stalls();
  // Dynamic batch sizing: the last decision and its inputs (zeros when off
  // or before rank 0's first report).
  BatchDecision batch_decision();
  // The ranks named as stragglers now, and every rank that reported step
  // times in the running generation (for the per-rank gauges).
  std::vector<v1::Straggler> stragglers() { return stragglers_->Named(); }
  std::vector<int> timed_ranks() { return stragglers_->Ranks(); }

 private:
  enum class Phase { kWaiting, kRunning, kRecovering, kFinished };

  struct Member {
    std::string worker_id;
    int rank = 0;
    v1::Endpoint endpoint;
    std::string node;
    std::string instance;     // JoinRequest.instance of the process
    std::string incarnation;  // JoinRequest.incarnation of the job
    // False for a member restored from the state directory until it
    // heartbeats this coordinator (CheckCollision ignores it until then).
    bool confirmed = true;
    absl::Time last_heartbeat;
    v1::WorkerProgress progress;
    bool left = false;
    bool finished = false;
    // Expelled for silence or seen to exit: the next rendezvous does not
    // wait for it.
    bool gone = false;
    // The first rank of this generation whose failure report named this
    // one (-1: none), and what it said.
    int accused_by = -1;
    std::string accusation;
  };
  // A worker process's Coordinator.Attach calls (a re-attach may overlap
  // the old call's end).
  struct Attachment {
    std::string instance;
    int open = 0;
    absl::Time closed_at = absl::InfinitePast();  // when `open` last fell to 0
  };
  static constexpr int kMaxLost = 64;
  static constexpr int kMaxShardServers = 1024;

  explicit CoordinatorCore(const CoordinatorOptions& options);

  absl::Status CheckJob(const v1::JobRef& job) const;
  // ALREADY_EXISTS when `request`'s worker id belongs to a live member or
  // waiting joiner of another process (a second job with this job id).
  absl::Status CheckCollision(const v1::JoinRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ABORTED unless `generation` is the current, running one.
  absl::Status CheckCurrent(int64_t generation, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FormGeneration() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndGeneration(const std::string& reason, bool failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RendezvousReady(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the running generation was restored from disk, no member has
  // heartbeated since, and `request` is of another (known) incarnation.
  bool IsNewIncarnation(const v1::JoinRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long `m` may be silent (see the header comment).
  absl::Duration Tolerance(const Member& m) const;
  // Marks `m` gone and lists it in lost_ with `reason`.
  void Expel(Member& m, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Recovering, and every member of the ended generation is back in the
  // rendezvous, lost or left.
  bool EveryLiveMemberRejoined() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks gone each member whose attachment is closed and who was accused,
  // whose generation failed, or who stayed detached for detach_grace (see
  // the header comment), and ends the running generation for the first.
  // True when a member was confirmed gone.
  bool ConfirmDetached(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Expels the first running member silent past its Tolerance and ends the
  // generation; true when it did.
  bool ExpelSilent(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Snapshot under mu_, write outside it (locks are released around I/O).
  void Persist() ABSL_LOCKS_EXCLUDED(mu_);
  v1::CoordinatorState StateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string StatePath() const;

  const CoordinatorOptions options_;
  // Thread-safe itself; called under mu_ (it never calls back). Reset when
  // a generation forms or ends (ranks are renumbered).
  const std::unique_ptr<StragglerDetector> stragglers_;

  mutable absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kWaiting;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t restarts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t global_batch_size_ ABSL_GUARDED_BY(mu_) = 0;
  // --batch_auto: created at rank 0's first report (the reference batch).
  std::unique_ptr<BatchController> batch_controller_ ABSL_GUARDED_BY(mu_);
  BatchDecision batch_decision_ ABSL_GUARDED_BY(mu_);
  std::string batch_reason_ ABSL_GUARDED_BY(mu_);
  int64_t batch_reported_step_ ABSL_GUARDED_BY(mu_) = -1;
  // Feeds rank 0's report to the controller and takes its decision.
  void ObserveBatch(const v1::WorkerProgress& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::CheckpointRecord last_checkpoint_ ABSL_GUARDED_BY(mu_);
  // The commits before it, newest first, at most kEarlierCheckpoints.
  std::vector<v1::CheckpointRecord> earlier_checkpoints_ ABSL_GUARDED_BY(mu_);
  static constexpr int kEarlierCheckpoints = 3;
  // Background sharded checkpoints (CommitCheckpointRequest.shards > 0):
  // the steps some but not all of whose shards were reported.
  ShardCommits shard_commits_ ABSL_GUARDED_BY(mu_);
  // Makes `record` the last checkpoint (the previous one goes to earlier_).
  void RecordCheckpoint(const v1::CheckpointRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string end_reason_ ABSL_GUARDED_BY(mu_);
  // The newest generation that ended by a failure (0: none).
  int64_t last_failed_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::LostWorker> lost_ ABSL_GUARDED_BY(mu_);  // newest last, <= kMaxLost
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  // The previous CheckLiveness call (InfinitePast: none yet).
  absl::Time last_liveness_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t stalls_ ABSL_GUARDED_BY(mu_) = 0;
  // Rendezvous in progress: worker_id -> request, and when the last came.
  std::map<std::string, v1::JoinRequest> pending_ ABSL_GUARDED_BY(mu_);
  absl::Time last_join_ ABSL_GUARDED_BY(mu_);
  // Answers for the workers of the generation just formed, until collected.
  std::map<std::string, v1::JoinResponse> results_ ABSL_GUARDED_BY(mu_);
  // The current generation's members by worker_id.
  std::map<std::string, Member> members_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);
  // By worker_id: the latest instance that attached.
  std::map<std::string, Attachment> attachments_ ABSL_GUARDED_BY(mu_);
  // Latest ReportShardServer per server_id.
  std::map<std::string, v1::ShardServerStatus> shard_servers_ ABSL_GUARDED_BY(mu_);
  int64_t state_version_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex persist_mu_;
  int64_t persisted_version_ ABSL_GUARDED_BY(persist_mu_) = -1;
};

}  // namespace tandem

#endif  // TANDEM_SERVICES_COORDINATOR_COORDINATOR_CORE_H_
