// ReplicaStore: the copy a shard server keeps of its neighbour's range
// (issue 34 item 3). The neighbour (the primary) sends every chunk after
// each step it applies (ShardServer.Replicate / ReplicateStream): normally
// the step's summed gradient, which the store applies to its copy of the
// step before with the same optimizer code, learning rate and gradient
// scale, so the copy stays bit-for-bit the primary's at 4 bytes per element
// per step (the optimizer is element-wise fp32 without fused multiply-adds:
// common/optim/optimizer.h); at InitShard, and whenever the store holds no
// copy of the step before (it restarted, or missed a step), the chunk's
// parameters and optimizer state in full. It keeps the two newest steps of
// every chunk, so after the primary is lost the range can be rebuilt at
// the step the workers last completed even when the primary had already
// applied the next one, or at the step before when the last one was still
// on its way (replication lags the primary by up to one step:
// replicator.h).
//
//   ReplicaStore replica;
//   ASSIGN_OR_RETURN(ReplicaStore::Accepted a, replica.Accept(chunk_message));
//   if (a == ReplicaStore::Accepted::kNeedsState) { /* ack needs_state */ }
//   RETURN_IF_ERROR(replica.Read(step, "", lo, hi, out));         // parameters
//   RETURN_IF_ERROR(replica.Read(step, "exp_avg", lo, hi, out));  // state
//
// A message of a newer generation (or another range, chunk cut or
// optimizer) replaces everything held; an older generation is refused
// (FAILED_PRECONDITION). Each kept step of a chunk owns an optimizer of
// the primary's config (its state buffers) and the parameters, built on
// the first message that fills it, then reused. Memory: 2 x (1 + state
// buffers) x 4 bytes per element of the neighbour's range (bytes()).
// Thread-safe (one mutex; Accept copies and steps a chunk under it).
#ifndef TANDEM_SERVICES_SHARDSERVER_REPLICA_STORE_H_
#define TANDEM_SERVICES_SHARDSERVER_REPLICA_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  enum class Accepted {
    kHeld,        // the store holds the chunk at the message's step
    kNeedsState,  // a gradient without a copy of step - 1: send the full state
  };
  // INVALID_ARGUMENT for a malformed message (named), FAILED_PRECONDITION
  // for a stale generation.
  absl::StatusOr<Accepted> Accept(const v1::ReplicaChunk& chunk);
  // Values of `name` ("" = the parameters) over [lo, hi) as of `step` into
  // out; FAILED_PRECONDITION naming the chunk when no kept version of it
  // is at `step`, INVALID_ARGUMENT outside the replicated range or for a
  // buffer name the primary's optimizer does not have.
  absl::Status Read(int64_t step, const std::string& name, int64_t lo, int64_t hi,
                    float* out) const;
  ReplicaInfo info() const;

 private:
  // One kept step of one chunk: the parameters and an optimizer holding
  // the state (nullptr until first filled).
  struct Version {
    int64_t step = -1;
    std::vector<float> params;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::vector<optim::StateBuffer> state;  // optimizer->state(), taken once
  };
  struct Chunk {
    int64_t lo = 0, hi = 0;
    Version v[2];
  };
  void Reset(const v1::ReplicaChunk& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds v's buffers for chunk k on first use.
  absl::Status Prepare(const Chunk& k, Version& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Accepted> AcceptState(const v1::ReplicaChunk& c, Chunk& k)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Accepted> AcceptGradient(const v1::ReplicaChunk& c, Chunk& k)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  optim::ParamRange range_ ABSL_GUARDED_BY(mu_);
  int64_t chunk_elements_ ABSL_GUARDED_BY(mu_) = 0;
  v1::OptimizerConfig optimizer_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);  // the optimizer's state buffers
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_REPLICA_STORE_H_
