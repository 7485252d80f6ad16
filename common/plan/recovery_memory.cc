#include "common/plan/recovery_memory.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/shard/replica_memory.h"

namespace tandem {
namespace plan {
namespace {

constexpr int64_t kFloat = 4;

// Optimizer state floats per element (strategy_cost.cc's rule).
int64_t StateFloats(const PlanRequest& r) {
  if (r.optimizer == "adamw") return 2;
  return r.momentum != 0 ? 1 : 0;
}

double MiB(int64_t b) { return static_cast<double>(b) / (1 << 20); }

}  // namespace

RecoveryMemory RecoveryMemoryOf(const PlanRequest& r, const Prediction& p) {
  RecoveryMemory m;
  m.strategy = p.strategy;
  const int64_t n = r.model.parameters;
  const int64_t state = StateFloats(r) * n * kFloat;
  const std::string& s = p.strategy;
  if (s == "ps" || s == "hybrid") {
    if (r.cluster.servers >= 2) {
      // On by default (--sync_opt replicate=0 turns it off): the replica of
      // the neighbour's range at its two newest steps, this range's
      // copies from before its last two steps and its last summed
      // gradient (what the replica is sent: fp32, no optimizer state);
      // and the background checkpoint's snapshot of its range.
      const int64_t range = p.server_bytes / ((1 + StateFloats(r)) * kFloat);
      m.server_bytes = p.server_bytes + shard::ReplicaExtraFloats(range, StateFloats(r)) * kFloat;
      m.rank0_bytes = state;
      m.source = "memory: the lost server's range from its replica on the next server, <= 1 "
                 "step redone; --sync_opt replicate=0 saves this and uses the disk";
    } else {
      m.server_bytes = p.server_bytes;  // the background checkpoint's snapshot
      m.source = "disk: one shard server keeps no replica";
    }
  } else if (absl::StartsWith(s, "zero")) {
    // Peer replicas (--replica_every, default 5): two own snapshots and a
    // neighbour's copy of the 1/W shard (master slice + optimizer state),
    // plus the staging of one send; and the background checkpoint's
    // snapshot of the shard (services/worker/checkpointer_background.cc).
    const int64_t ranks = std::max(1, r.cluster.ranks());
    m.rank_bytes = 5 * (n + StateFloats(r) * n) * kFloat / ranks;
    m.source = "memory: each shard also on its ring neighbour, <= --replica_every steps redone";
  } else {  // allreduce, hier, compressed:*
    m.rank_bytes = state;
    m.rank0_bytes = n * kFloat + state;
    m.source = "memory: every rank holds the whole state";
  }
  return m;
}

std::string FormatRecoveryMemory(const RecoveryMemory& m) {
  std::string out = absl::StrFormat("%-22s", m.strategy);
  if (m.rank_bytes > 0) absl::StrAppendFormat(&out, " +%.1f MiB/worker", MiB(m.rank_bytes));
  if (m.rank0_bytes > 0) absl::StrAppendFormat(&out, " +%.1f MiB on rank 0", MiB(m.rank0_bytes));
  if (m.server_bytes > 0) absl::StrAppendFormat(&out, " +%.1f MiB/server", MiB(m.server_bytes));
  if (m.rank_bytes == 0 && m.rank0_bytes == 0 && m.server_bytes == 0) out += " +0";
  return out + " (" + m.source + ")";
}

}  // namespace plan
}  // namespace tandem
