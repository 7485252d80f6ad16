// LaneQueue: the job queue of one RemoteShards lane (a thread with its own
// push stream or pull calls to one shard server), and PullGate, which holds
// a chunk's pull until its push has gone out.
//
// Why an order other than FIFO (issue 33): backward makes the last layers'
// gradients final first, but the next forward needs the first layers'
// parameters first, and a server applies a chunk only once every rank's
// push of it is in. On a slow link the pushes take far longer than
// backward, so a push lane (Options::lowest_chunk_first) sends its chunks
// in one fixed ascending order, every step and on every rank
// (Options::push_order): all ranks put the same chunk on the wire at about
// the same time, the chunks complete on the servers first layer first, and
// the next forward's first layers land first. (Sending whatever was queued
// first, as backward made it, let ranks diverge: a pull then waited for a
// chunk another rank pushed last, and the next forward waited for the
// first layer, pushed last.) The push stream's Write must wait for the
// link for this to hold on the wire: the shard servers fix a small HTTP/2
// window (services/shardserver/shard_server.h).
// Pulls are issued right behind their pushes but must reach the server in
// the order the pushes did (a pull waits there until its chunk is applied,
// and a pull lane runs one call at a time): PullGate keeps a chunk's pull
// back until its push lane has written the push.
//
//   LaneQueue q({.capacity = 2 * chunks + 2, .lowest_chunk_first = true,
//                .push_order = {0, 2, 4}});
//   q.Enqueue(job);            // any thread
//   LaneJob j;
//   while (q.Next(&j)) Run(j); // the lane's thread; false once stopped
//   q.Stop();
//
// LaneQueue is thread-safe; the callers' protocol keeps it within its
// capacity (every chunk of the lane at most twice, plus a close). PullGate
// is not thread-safe (RemoteShards holds its mutex around it). Neither
// allocates after construction.
#ifndef TANDEM_COMMON_SHARD_LANE_QUEUE_H_
#define TANDEM_COMMON_SHARD_LANE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tandem {
namespace shard {

// One unit of a lane's work.
struct LaneJob {
  enum Kind { kPush, kClose, kPull } kind = kPush;
  int chunk = 0;
  int64_t step = 0;
  float* params = nullptr;     // pulls: where the chunk lands
  uint8_t* block = nullptr;    // delta pulls: where the int8 block lands
  bool reset = false;          // pulls: reset_delta_reference
  const void* data = nullptr;  // pushes: read only
};

struct LaneQueueOptions {
  size_t capacity = 1;              // jobs queued at once, >= 1
  bool lowest_chunk_first = false;  // pushes by chunk index (see above); else FIFO
  // With lowest_chunk_first: the chunks this lane pushes each step,
  // ascending. A push then waits for every chunk before it in this list
  // (so every rank puts the same chunk on the wire at the same time: a
  // server applies a chunk only once every rank's push of it is in, and a
  // pull lane waits on its chunks in order), unless a close is queued (an
  // abandoned step: what is queued goes, lowest first). Chunks not listed
  // go lowest first when nothing listed is due. Empty: lowest queued first.
  std::vector<int> push_order;
};

class LaneQueue {
 public:
  explicit LaneQueue(const LaneQueueOptions& options);
  LaneQueue(const LaneQueue&) = delete;
  LaneQueue& operator=(const LaneQueue&) = delete;

  void Enqueue(const LaneJob& job);
  // Waits for the next job; false once stopped (queued jobs are dropped).
  bool Next(LaneJob* job);
  void Stop();

 private:
  // The queued push to send next (lowest first, in push_order_), or
  // count_ when none may go yet.
  size_t PickPush() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const bool lowest_first_;
  const std::vector<int> push_order_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<LaneJob> ring_ ABSL_GUARDED_BY(mu_);  // capacity fixed at creation
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // push_order_'s next chunk this step
};

class PullGate {
 public:
  explicit PullGate(int chunks) : state_(chunks, kIdle), held_(chunks) {}

  // A new step's pushes: no push queued, nothing held.
  void Reset();
  // Chunk c's push is queued on its lane.
  void PushQueued(int c) { state_[c] = kQueued; }
  // A pull of chunk c: true when it may go to its lane now; false when it
  // is held until PushWritten(c) (its push is queued and not yet written).
  bool Admit(const LaneJob& pull);
  // Chunk c's push was written (or dropped after a failure): true with the
  // held pull in *pull when there was one.
  bool PushWritten(int c, LaneJob* pull);

 private:
  enum State : char { kIdle, kQueued, kHeld, kWritten };
  std::vector<State> state_;
  std::vector<LaneJob> held_;
};

}  // namespace shard
}  // namespace tandem

#endif  // TANDEM_COMMON_SHARD_LANE_QUEUE_H_
