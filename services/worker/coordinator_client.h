// CoordinatorClient: a worker's side of the control plane. Joins the job
// (retrying while the coordinator is not up yet), keeps a heartbeat thread
// that reports progress every heartbeat period and remembers the command in
// the latest reply (CONTINUE / STOP / REJOIN with the coordinator's reason),
// reports failed collectives, commits checkpoints and leaves.
//
//   CoordinatorClientOptions o;
//   o.target = "127.0.0.1:7000";  o.job_id = "j1";  o.worker_id = "host:123";
//   ASSIGN_OR_RETURN(auto client, CoordinatorClient::Create(o));
//   ASSIGN_OR_RETURN(v1::JoinResponse join, client->Join());   // heartbeats start
//   ...  client->SetProgress(progress);
//        if (client->command().kind == Command::kRejoin) { ... client->Join(); }
//   RETURN_IF_ERROR(client->Leave(/*finished=*/true));         // heartbeats stop
//
// Thread-safety: Join and Leave (which start and stop the heartbeat thread)
// from one thread, the trainer's; everything else from any thread. Ownership: owns its channel (shared with the Gloo store through
// channel()) and its heartbeat thread, joined by Leave() or the destructor.
// Failure: Join returns UNAVAILABLE after `join_attempts` failed connects
// (coordinator unreachable), the coordinator's error otherwise (a finished
// job, max_workers reached, the rendezvous timing out). A heartbeat that
// fails is retried at the next period; after `lost_after` without a reply
// the command becomes kCoordinatorLost (a coordinator restarted within that
// time resumes the generation: training goes on). Each client sends a
// per-process instance id with Join, so a second process claiming the same
// worker id (another job with this job id) is refused, not merged. From
// the first Join to Leave (or destruction) the client holds a
// CoordinatorAttachment open, whose end tells the coordinator this process
// is gone.
// Nothing blocks without a deadline.
#ifndef TANDEM_SERVICES_WORKER_COORDINATOR_CLIENT_H_
#define TANDEM_SERVICES_WORKER_COORDINATOR_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "proto/coordinator.grpc.pb.h"
#include "services/worker/coordinator_attachment.h"

namespace tandem {
namespace worker {

struct CoordinatorClientOptions {
  std::string target;            // coordinator "host:port" (required)
  std::string job_id = "tandem";
  std::string worker_id;         // stable for the process (required)
  std::string incarnation;       // JoinRequest.incarnation; "" = unknown
  v1::Endpoint endpoint;         // reported for status listings
  std::string node = "localhost";  // groups ranks into nodes
  // How long one Join may wait for the rendezvous to complete.
  absl::Duration join_timeout = absl::Minutes(5);
  // Join attempts while the coordinator is UNAVAILABLE, with backoff from
  // 100 ms doubling up to 2 s (the default rides out ~20 s of start-up).
  int join_attempts = 12;
  // Deadline of every other call (heartbeat, failure report, commit, leave).
  absl::Duration rpc_timeout = absl::Seconds(5);
  // Heartbeat period when Join's reply gives none.
  absl::Duration default_heartbeat_period = absl::Seconds(1);
  // No heartbeat reply for this long: command() becomes kCoordinatorLost.
  absl::Duration lost_after = absl::Seconds(60);
};

// The latest instruction from the coordinator.
struct Command {
  enum Kind { kContinue, kStop, kRejoin, kCoordinatorLost };
  Kind kind = kContinue;
  std::string reason;
  int64_t generation = 0;  // the coordinator's current generation
  // Dynamic batch sizing: the coordinator's global batch (0 = no decision)
  // and why.
  int64_t global_batch = 0;
  std::string batch_reason;
};

class CoordinatorClient {
 public:
  // INVALID_ARGUMENT for an empty target or worker id.
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Create(
      const CoordinatorClientOptions& options);
  ~CoordinatorClient();  // stops the heartbeat thread (no Leave)

  CoordinatorClient(const CoordinatorClient&) = delete;
  CoordinatorClient& operator=(const CoordinatorClient&) = delete;

  // Joins the next generation (stopping heartbeats of the previous one),
  // blocking until the rendezvous completes; on success starts heartbeats
  // for the new generation and resets command() to kContinue. `timeout`
  // bounds the rendezvous wait (zero: options.join_timeout).
  absl::StatusOr<v1::JoinResponse> Join(absl::Duration timeout = absl::ZeroDuration());

  // Called from the heartbeat thread (no lock held) each time a reply says
  // the worker's generation ended by a failure (REJOIN with failure set),
  // with that generation and the coordinator's reason: the trainer aborts
  // the generation's collectives. Set before Join; must not block.
  void SetFailureHandler(std::function<void(int64_t generation, const std::string& reason)> h);

  // Progress to send with the following heartbeats.
  void SetProgress(const v1::WorkerProgress& progress);
  // One finished step's times (seconds; see v1::StepTiming), summed into
  // the next heartbeat's StepTiming for the coordinator's straggler
  // detector; an answered heartbeat takes what it sent off the sums.
  // Allocates nothing.
  void AddStepTiming(int64_t step, double compute, double data_wait, double comm, double other);
  Command command() const;

  // Tells the coordinator a collective failed (ends the generation).
  // peer_exited: this process saw peer_rank's process gone (not merely
  // slow or unreachable), so the coordinator stops waiting for it at once.
  absl::Status ReportFailure(const std::string& operation, int peer_rank,
                             const std::string& message, bool peer_exited = false);
  // Records a durably written checkpoint for the current generation.
  absl::Status CommitCheckpoint(const v1::CheckpointRecord& record);
  // ... for `generation` (a background write committing a snapshot taken
  // then: refused when that generation has ended).
  // shards > 0: this rank's `shard` of a background sharded checkpoint; the
  // coordinator records the step once all its shards are in (shard_commits.h).
  absl::Status CommitCheckpoint(const v1::CheckpointRecord& record, int64_t generation,
                                int shard = 0, int shards = 0);
  // Stops heartbeats and leaves; finished = the job completed here.
  absl::Status Leave(bool finished);

  // The job as the coordinator sees it (members of the current or the
  // just-ended generation with their last heartbeats).
  absl::StatusOr<v1::GetJobStatusResponse> GetJobStatus();

  // Sends one heartbeat now (what the thread does each period); for tests.
  absl::Status HeartbeatOnce();

  int64_t generation() const;
  int rank() const;
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  const CoordinatorClientOptions& options() const { return options_; }

 private:
  explicit CoordinatorClient(const CoordinatorClientOptions& options);
  void StartHeartbeats(absl::Duration period);
  void StopHeartbeats();
  void HeartbeatLoop(absl::Duration period, absl::Notification* stop);
  v1::JobRef Job() const;

  const CoordinatorClientOptions options_;
  std::string instance_;  // JoinRequest.instance: pid and a random number
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;

  mutable absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  v1::WorkerProgress progress_ ABSL_GUARDED_BY(mu_);
  v1::StepTiming timing_ ABSL_GUARDED_BY(mu_);  // since the last answered heartbeat
  Command command_ ABSL_GUARDED_BY(mu_);
  absl::Time last_reply_ ABSL_GUARDED_BY(mu_);
  std::function<void(int64_t, const std::string&)> on_failure_ ABSL_GUARDED_BY(mu_);

  // Owned by the trainer thread (Join / Leave / destructor).
  std::unique_ptr<absl::Notification> stop_heartbeats_;
  std::thread heartbeat_thread_;
  // Opened by the first Join, closed after Leave (declared after stub_: it
  // borrows it).
  std::unique_ptr<CoordinatorAttachment> attachment_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_COORDINATOR_CLIENT_H_
