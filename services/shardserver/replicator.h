// Replicator: the primary's sender of range replication (issue 34 item 3).
// The range store hands it each chunk it has applied (ChunkForwarder); one
// background thread, off the receive and apply paths, reads what the
// replica needs (RangeStore::ReadChunkForReplica) and sends it to the
// replica server, then marks the chunk replicated so it may apply its next
// step. Every chunk queued when the thread comes round goes out in one
// ShardServer.ReplicateStream call (up to kBatchBytes of payload), in queue
// order, one acknowledgement per chunk.
//
// What is sent: the step's summed gradient (4 bytes per element), which the
// replica applies to its copy of the step before with the same optimizer,
// learning rate and gradient scale (replica_store.h): bit-for-bit the
// primary's state at a third of the bytes of sending the state for AdamW
// (a half for SGD with momentum), and no state copied into messages. The
// gradient is swapped from the chunk into the message, not copied. The
// full state (parameters and optimizer buffers) goes out at InitShard and
// for every chunk whose replica answers needs_state (it holds no copy of
// the step before: it restarted, or a step was lost), in a second call
// before the chunk is marked replicated.
//
// Lag, not a wait on every pull: the chunk is queued here as soon as it has
// applied step S, before S's pulls are answered, and it applies S + 1 only
// once S is acknowledged (RangeStore::AwaitReplica). The send of S overlaps
// the workers' pull, forward, backward and push of S + 1, so the replica
// is at S or S + 1 while the primary is at S + 1 and no pull waits for it.
// A push of S + 1 is acknowledged only once every chunk's S is
// (RangeStore::WaitReplicated): a worker counts S + 1 done at that
// acknowledgement, its pulls of S + 1 landing during the next forward, so
// the replica then holds S at least.
// One thread sends in queue order, so a replica holding some chunk's S + 1
// holds every chunk's S. After a lost server, the state rebuilt is the
// newest step the replica and the survivors all hold: the one the workers
// completed, or the step before (then that one step is redone). A survivor
// may be two steps past that, which is why ranges keep copies from before
// their last two steps.
//
//   Replicator replicator(store, {.auth_token = token});
//   store->SetForwarder(&replicator);   // before the first InitShard
//
// A chunk applied again before its last send left is sent once, at its
// newest step (its replica, missing the step between, then asks for the
// full state). When the replica cannot be reached (a lost server), the
// chunk is still marked replicated — the range must not stall on a dead
// replica — and the failure is logged once per generation; the rest of
// that generation sends nothing more (a hung replica would otherwise hold
// every chunk for a timeout): that range then recovers from the disk
// checkpoint. Thread-safe; the store is borrowed and
// must outlive the replicator; the destructor stops the thread (sends in
// flight end at their deadline).
#ifndef TANDEM_SERVICES_SHARDSERVER_REPLICATOR_H_
#define TANDEM_SERVICES_SHARDSERVER_REPLICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/shardserver.grpc.pb.h"
#include "services/shardserver/range_store.h"

namespace tandem {
namespace shardserver {

struct ReplicatorOptions {
  std::string auth_token;                      // sent with every Replicate call
  absl::Duration timeout = absl::Seconds(10);  // per Replicate call
};

class Replicator : public ChunkForwarder {
 public:
  Replicator(RangeStore* store, ReplicatorOptions options);
  ~Replicator() override;
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;

  void Applied(int64_t generation, int chunk, int64_t step) override;
  // Ends the thread (a send in flight ends at its deadline); later Applied
  // calls do nothing. Idempotent; the destructor calls it.
  void Stop();

  // Bytes of values sent to replicas so far, and how many chunks went as
  // gradients and how many in full.
  int64_t bytes_sent() const;
  int64_t gradients_sent() const;
  int64_t states_sent() const;

 private:
  // Payload per ReplicateStream call beyond which the rest of the queue
  // waits for the next call (the first chunks' acknowledgements wait for
  // the whole call).
  static constexpr int64_t kBatchBytes = 8 << 20;

  void Loop();
  // Reads and sends the chunks of `generation` taken from the queue
  // (batch_), then marks them replicated.
  void SendBatch(int64_t generation);
  // One ReplicateStream call with msgs_[i] for i in `which`; acks_ gets the
  // acknowledgements.
  absl::Status Call(const std::string& address, const std::vector<int>& which);

  RangeStore* const store_;
  const ReplicatorOptions options_;
  // The loop thread's, reused: one message per chunk of the batch, the
  // chunks and the steps they were read at.
  std::vector<v1::ReplicaChunk> msgs_;
  std::vector<int> batch_;
  std::vector<int64_t> steps_;
  std::vector<int> all_, resend_;  // indices into msgs_
  v1::ReplicaAcks acks_;
  std::string address_;   // of stub_ (the loop thread's)
  std::unique_ptr<v1::ShardServer::Stub> stub_;
  int64_t failed_generation_ = 0;  // the loop thread's: logged once per generation

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> queue_ ABSL_GUARDED_BY(mu_);   // chunks to send, in order
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<char> queued_ ABSL_GUARDED_BY(mu_);  // per chunk
  int64_t bytes_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t gradients_sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t states_sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_REPLICATOR_H_
