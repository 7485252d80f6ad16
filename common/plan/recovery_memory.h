// RecoveryMemory: the memory that losing no work costs (issue 34 item 5),
// per strategy — what `tandem plan` prints under its table.
//
//   ASSIGN_OR_RETURN(Prediction p, Predict(request, "ps"));
//   RecoveryMemory m = RecoveryMemoryOf(request, p);
//   std::string line = FormatRecoveryMemory(m);
//
// Per rank: allreduce, hier and compressed keep a host copy of the
// optimizer state at a generation's end (services/worker/memory_state.h),
// and rank 0 one background-checkpoint snapshot of parameters and
// optimizer state (background_checkpoint.h). zero1/2/3: every rank holds
// four copies of its 1/W shard for peer recovery (two own, a neighbour's,
// one send's staging) and one background-checkpoint snapshot of it. ps and
// hybrid (replicas on by default with >= 2 servers): each shard server
// keeps its range's copies from before its last two steps, its last
// summed gradient (what its replica is sent) and the neighbour's range at
// its two newest steps (services/shardserver/replicator.h), plus its
// background-checkpoint snapshot: 5 x (fp32 master + optimizer state) of a
// range and 4 bytes per element for the gradient (1 x with one server); rank 0 holds the whole optimizer state on the host while it
// rebuilds a lost server's range. Background snapshots are counted
// because --background_checkpoint is on by default. Pure
// functions; thread-safe.
#ifndef TANDEM_COMMON_PLAN_RECOVERY_MEMORY_H_
#define TANDEM_COMMON_PLAN_RECOVERY_MEMORY_H_

#include <cstdint>
#include <string>

#include "common/plan/strategy_cost.h"

namespace tandem {
namespace plan {

struct RecoveryMemory {
  std::string strategy;
  int64_t rank_bytes = 0;      // every rank, held between failures
  int64_t rank0_bytes = 0;     // rank 0 only: snapshot, or a recovery's transient copy
  int64_t server_bytes = 0;    // each shard server
  std::string source;          // where a lost worker / server is recovered from
};

RecoveryMemory RecoveryMemoryOf(const PlanRequest& request, const Prediction& prediction);

// "allreduce  +1.2 MiB/worker, +2.4 MiB on rank 0 (memory)".
std::string FormatRecoveryMemory(const RecoveryMemory& m);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_RECOVERY_MEMORY_H_
