// ServerRecovery: recovery without the disk for strategies whose state
// lives on replicated shard servers (ps, hybrid; issue 34 item 3).
//
// A lost shard server ends the generation. Each rank has noted the data
// position of its two newest completed steps (Note, after every step). The
// next generation starts with one small all-gather of those notes; rank 0
// then rebuilds the parameters and optimizer state of the newest noted
// step the servers still hold — every range from its own server's kept
// versions, a lost server's range from the replica on its neighbour
// (sync::ServerSideCheckpoint::RecoverFromServers) — trying older noted
// steps down to the last committed checkpoint, and broadcasts the chosen
// step, its data position and the parameters. The optimizer state goes
// back to the servers (a restarted one is empty) with the generation's
// InitShard. Every rank then redoes at most the step in flight.
//
//   ServerRecovery r(/*enabled=*/true);
//   r.Note(step, epoch, samples_in_epoch);          // after every step
//   ASSIGN_OR_RETURN(MemoryRecovery m, r.TryRestore(g, committed_step, params));
//
// Not used (the disk checkpoint, as before) when the strategy keeps no
// replicas — one shard server, --sync_opt replicate=0, int8 pulls — which
// rank 0 logs when a generation ended after training; or when no noted
// step newer than the last commit is held. Thread-compatible (the trainer
// thread). Failure: TryRestore returns the control mesh's error (a
// membership problem: the caller re-joins).
#ifndef TANDEM_SERVICES_WORKER_SERVER_RECOVERY_H_
#define TANDEM_SERVICES_WORKER_SERVER_RECOVERY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "services/worker/generation.h"
#include "services/worker/memory_state.h"

namespace tandem {
namespace worker {

class ServerRecovery {
 public:
  explicit ServerRecovery(bool enabled) : enabled_(enabled) {}

  // After step `step` completed at this data position.
  void Note(int64_t step, int64_t epoch, int64_t samples_in_epoch);
  // All ranks, at a new generation's restore: see the file comment.
  // `params` is the flat parameter vector in host memory (ps and hybrid
  // run on the CPU); overwritten on every rank when restored.
  absl::StatusOr<MemoryRecovery> TryRestore(Generation& g, int64_t committed_step,
                                            float* params, int64_t size);

 private:
  struct Position {
    int64_t step = -1;
    int64_t epoch = 0;
    int64_t samples = 0;
  };
  // Rank 0: the newest candidate step the servers hold (-1: none).
  int64_t RecoverOnRank0(Generation& g, const int64_t* all, int64_t committed_step,
                         float* params, Position* chosen);

  const bool enabled_;
  Position noted_[2];  // newest first
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_SERVICES_WORKER_SERVER_RECOVERY_H_
