// BackgroundCheckpointWriter: writes, fsyncs and commits one checkpoint
// snapshot at a time on its own thread, so a checkpoint does not stop
// training (--background_checkpoint, issue 34 item 4).
//
//   ASSIGN_OR_RETURN(auto w, BackgroundCheckpointWriter::Create(options, commit));
//   CheckpointSnapshot* snap = w->Acquire();   // waits if the last write is still running
//   snap->Capture(view);                       // at a step boundary: a host copy
//   w->Submit(path, record, {generation});     // returns at once; training continues
//   ...
//   BackgroundCheckpointWriter::Outcome last = w->Drain();   // before a synchronous write
//
// One snapshot at a time: a checkpoint step that finds the previous write
// still running waits for it (counted in tandem_checkpoint_waits_total and
// tandem_checkpoint_wait_seconds_total) rather than skipping, so every
// --checkpoint_every step still gets its checkpoint and the memory held
// stays one snapshot (tandem_checkpoint_snapshot_bytes). A checkpoint
// counts only once `commit` (the coordinator's CommitCheckpoint, for the
// generation the snapshot was taken in) succeeded: a write or commit that
// fails (a full disk, the generation ended meanwhile, a crash mid-file)
// leaves the previous committed checkpoint as the one to resume from; it
// is logged as a warning and counted in tandem_checkpoint_failures_total,
// and training goes on. A sharded checkpoint (zero1/2/3) has one writer
// per rank: each commits its own shard ({generation, shard, shards}), rank
// 0 after writing the manifest too (Submit's `after_write`), and the
// coordinator records the step once every shard is in.
//
// Cost: the snapshot copy (one memcpy per buffer) is the only part on the
// training thread; the writer checksums the copy and writes it with
// O_DIRECT at SCHED_IDLE (options below), so neither the page cache copy
// nor its writeback takes CPU from the step.
//
// Thread-safety: Acquire, Submit and Drain from one thread (the trainer's);
// the writer thread is internal. Acquire must be followed by Submit before
// the next Acquire. The destructor waits for the write in flight and joins
// the thread. Owns the snapshot and the thread; borrows the metrics registry.
#ifndef TANDEM_SERVICES_WORKER_BACKGROUND_CHECKPOINT_H_
#define TANDEM_SERVICES_WORKER_BACKGROUND_CHECKPOINT_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/checkpoint/checkpoint.h"
#include "common/metrics/metrics.h"
#include "proto/coordinator.pb.h"
#include "services/worker/checkpoint_snapshot.h"

namespace tandem {
namespace worker {

// The checkpoint series every writer of this process reports into.
class CheckpointMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<CheckpointMetrics>> Create(Metrics* metrics);
  void RecordWrite(double seconds, int64_t snapshot_bytes);
  void RecordWait(double seconds);
  void RecordFailure();

 private:
  CheckpointMetrics() = default;
  prometheus::Histogram* write_seconds_ = nullptr;
  prometheus::Gauge* snapshot_bytes_ = nullptr;
  prometheus::Counter* waits_ = nullptr;
  prometheus::Counter* wait_seconds_ = nullptr;
  prometheus::Counter* failures_ = nullptr;
};

// Whom a commit is for: the generation the snapshot was taken in and, for
// one rank's shard of a sharded checkpoint, its index of `shards` (0: the
// record is the whole checkpoint).
struct CommitTarget {
  int64_t generation = 0;
  int shard = 0;
  int shards = 0;
};

struct BackgroundCheckpointOptions {
  checkpoint::WriteOptions write;        // test hook (fault injection)
  CheckpointMetrics* metrics = nullptr;  // borrowed; may be null
  // The writer thread's nice value (Linux, per thread): above the trainer's,
  // so the write takes CPU training leaves idle.
  int nice = 10;
  // Run the writer thread at SCHED_IDLE (Linux): it gets a core only when
  // nothing else would run there, so the write uses what training leaves
  // idle (communication waits) instead of slowing the step. A trainer that
  // must wait for the write (the next checkpoint step came first) lifts the
  // thread back to SCHED_OTHER at `nice` until that write is done, so a
  // machine with no idle CPU cannot starve it. Leaving SCHED_IDLE needs
  // CAP_SYS_NICE or an RLIMIT_NICE that allows `nice`; where that is
  // missing the thread is never put there (`nice` alone, as false).
  bool idle_priority = true;
  // Write the snapshot with O_DIRECT (checkpoint_image.h) where the file
  // system allows it; false: through the page cache.
  bool direct_io = true;
};

class BackgroundCheckpointWriter {
 public:
  // Records the written file with the coordinator for `target`.
  using CommitFn = std::function<absl::Status(const v1::CheckpointRecord&, const CommitTarget&)>;
  struct Outcome {
    int64_t step = -1;    // the last job's step (-1: none yet)
    std::string path;     // its file
    absl::Status status;  // OK: written and committed
  };

  BackgroundCheckpointWriter(BackgroundCheckpointOptions options, CommitFn commit);
  ~BackgroundCheckpointWriter();
  BackgroundCheckpointWriter(const BackgroundCheckpointWriter&) = delete;
  BackgroundCheckpointWriter& operator=(const BackgroundCheckpointWriter&) = delete;

  // Waits until no write is in flight; the snapshot to fill.
  CheckpointSnapshot* Acquire();
  // Writes the snapshot to `path`, then runs `after_write` when set (rank
  // 0's manifest of a sharded checkpoint), then commits `record` for
  // `target`; a failing step skips the rest.
  void Submit(std::string path, v1::CheckpointRecord record, CommitTarget target,
              std::function<absl::Status()> after_write = nullptr);
  // Runs `write` (the snapshot is elsewhere: the shard servers' own,
  // ps / hybrid) instead of writing the snapshot, then commits as Submit.
  void SubmitTask(std::function<absl::Status()> write, std::string path,
                  v1::CheckpointRecord record, CommitTarget target);
  // Waits until no write is in flight; the last job's outcome.
  Outcome Drain();
  // Non-blocking: the step of a write in flight, -1 when idle.
  int64_t in_flight_step() const;

 private:
  struct Job {
    std::function<absl::Status()> write;  // empty: write snapshot_ to path
    std::function<absl::Status()> after_write;  // may be empty
    std::string path;
    v1::CheckpointRecord record;
    CommitTarget target;
  };
  void Start(Job job);
  void Loop();
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_; }
  // The writer thread's scheduling: idle between jobs' starts and a wait.
  void LowerPriority();
  void RaisePriority() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until no write is in flight, the writer raised meanwhile.
  void AwaitIdle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasWorkOrQuit() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return busy_ || quit_; }
  absl::Status Write(const Job& job);

  const BackgroundCheckpointOptions o_;
  const CommitFn commit_;
  CheckpointSnapshot snapshot_;  // the trainer's until Submit, then the thread's until done
  mutable absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  Job job_ ABSL_GUARDED_BY(mu_);
  Outcome last_ ABSL_GUARDED_BY(mu_);
  pid_t tid_ ABSL_GUARDED_BY(mu_) = 0;  // the writer thread's, once it runs
  bool can_idle_ ABSL_GUARDED_BY(mu_) = false;  // SCHED_IDLE and back are allowed
  bool idle_ ABSL_GUARDED_BY(mu_) = false;  // it runs at SCHED_IDLE now
  bool waiter_ ABSL_GUARDED_BY(mu_) = false;  // the trainer waits for the write
  std::thread thread_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_BACKGROUND_CHECKPOINT_H_
