// Replicator: the primary's sender of range replication (issue 34 item 3).
// The range store hands it each chunk it has applied (ChunkForwarder); one
// background thread, off the receive and apply paths, reads the chunk's
// parameters and optimizer state (RangeStore::ReadChunkForReplica) and
// sends them to the replica server (ShardServer.Replicate), then marks the
// chunk replicated so it may apply its next step.
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
// Why the state and not the summed gradient: the replica then runs no
// optimizer and needs no ordering with the primary's steps, its copy is
// bit-identical by construction, and the same bytes serve as the point a
// recovery rolls back to. It costs (1 + optimizer buffers) x 4 bytes per
// element per step (8 for SGD with momentum, 12 for AdamW) against 4 for
// the gradient.
//
// A chunk applied again before its last send left is sent once, at its
// newest step. When the replica cannot be reached (a lost server), the
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

  // Bytes sent to replicas so far.
  int64_t bytes_sent() const;

 private:
  void Loop();
  // Sends chunk `chunk` of `generation` (the newest state it holds).
  void Send(int64_t generation, int chunk);

  RangeStore* const store_;
  const ReplicatorOptions options_;
  v1::ReplicaChunk msg_;  // the loop thread's, reused
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
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_REPLICATOR_H_
