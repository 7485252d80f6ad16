// ReplicaStore: the copy a shard server keeps of its neighbour's range
// (issue 34 item 3). The neighbour (the primary) sends every chunk's
// parameters and optimizer state after each step it applies
// (ShardServer.Replicate); the store keeps the two newest steps of every
// chunk, so after the primary is lost the range can be rebuilt at the step
// the workers last completed even when the primary had already applied the
// next one, or at the step before when the last one was still on its way
// (replication lags the primary by up to one step: replicator.h).
//
//   ReplicaStore replica;
//   RETURN_IF_ERROR(replica.Accept(chunk_message));   // per chunk and step
//   RETURN_IF_ERROR(replica.Read(step, "", lo, hi, out));         // parameters
//   RETURN_IF_ERROR(replica.Read(step, "exp_avg", lo, hi, out));  // state
//
// A message of a newer generation (or another range or chunk cut) replaces
// everything held; an older generation is refused (FAILED_PRECONDITION).
// Buffers are sized once per generation and chunk (first message), then
// reused. Memory: 2 x (1 + state buffers) x 4 bytes per element of the
// neighbour's range (bytes()). Thread-safe (one mutex; Accept copies a
// chunk under it).
#ifndef TANDEM_SERVICES_SHARDSERVER_REPLICA_STORE_H_
#define TANDEM_SERVICES_SHARDSERVER_REPLICA_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/optim/optimizer.h"
#include "proto/shardserver.pb.h"

namespace tandem {
namespace shardserver {

struct ReplicaInfo {
  int64_t generation = 0;  // 0 = nothing held
  optim::ParamRange range;
  int64_t step = -1;       // newest step every chunk holds (-1: some chunk has none)
  int64_t bytes = 0;
};

class ReplicaStore {
 public:
  absl::Status Accept(const v1::ReplicaChunk& chunk);
  // Values of `name` ("" = the parameters) over [lo, hi) as of `step` into
  // out; FAILED_PRECONDITION naming the chunk when no kept version of it
  // is at `step`, INVALID_ARGUMENT outside the replicated range or for a
  // buffer name the primary did not send.
  absl::Status Read(int64_t step, const std::string& name, int64_t lo, int64_t hi,
                    float* out) const;
  ReplicaInfo info() const;

 private:
  // One kept step of one chunk: the parameters, then each state buffer.
  struct Version {
    int64_t step = -1;
    std::vector<float> values;  // (1 + names) x chunk size
  };
  struct Chunk {
    int64_t lo = 0, hi = 0;
    Version v[2];
  };
  void Reset(const v1::ReplicaChunk& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  optim::ParamRange range_ ABSL_GUARDED_BY(mu_);
  int64_t chunk_elements_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_REPLICA_STORE_H_
