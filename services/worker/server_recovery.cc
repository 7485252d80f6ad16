#include "services/worker/server_recovery.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"
#include "common/sync/remote/server_side_checkpoint.h"

namespace tandem {
namespace worker {
namespace {

// Per rank in the all-gather: eligible, then two (step, epoch, samples).
enum Field { kEligible, kStep0, kEpoch0, kSamples0, kStep1, kEpoch1, kSamples1, kFields };

}  // namespace

void ServerRecovery::Note(int64_t step, int64_t epoch, int64_t samples_in_epoch) {
  if (noted_[0].step == step) {
    noted_[0] = {step, epoch, samples_in_epoch};
    return;
  }
  noted_[1] = noted_[0];
  noted_[0] = {step, epoch, samples_in_epoch};
}

absl::StatusOr<MemoryRecovery> ServerRecovery::TryRestore(Generation& g, int64_t committed_step,
                                                          float* params, int64_t size) {
  auto* servers = dynamic_cast<sync::ServerSideCheckpoint*>(g.sync.get());
  const bool eligible = enabled_ && servers != nullptr && servers->ServersReplicate();
  const int64_t mine[kFields] = {eligible ? 1 : 0,       noted_[0].step, noted_[0].epoch,
                                 noted_[0].samples,      noted_[1].step, noted_[1].epoch,
                                 noted_[1].samples};
  std::vector<int64_t> all(static_cast<size_t>(g.world()) * kFields);
  RETURN_IF_ERROR(g.ctl->AllGather(mine, all.data(), sizeof(mine)));
  MemoryRecovery out;
  bool everyone = true;
  for (int r = 0; r < g.world(); ++r) {
    const int64_t* f = all.data() + static_cast<size_t>(r) * kFields;
    everyone = everyone && f[kEligible] == 1;
    out.reached = std::max(out.reached, f[kStep0]);
  }
  if (servers == nullptr) return out;
  if (!everyone) {
    if (g.rank() == 0 && out.reached > std::max<int64_t>(committed_step, 0)) {
      LOG(INFO) << "shard servers keep no replicas (one server, --sync_opt replicate=0 or int8 "
                   "pulls): resuming from the last checkpoint";
    }
    return out;
  }
  // header: chosen step (-1: none), epoch, samples
  int64_t header[3] = {-1, 0, 0};
  if (g.rank() == 0) {
    Position chosen;
    header[0] = RecoverOnRank0(g, all.data(), committed_step, params, &chosen);
    header[1] = chosen.epoch;
    header[2] = chosen.samples;
  }
  RETURN_IF_ERROR(g.ctl->Broadcast(header, sizeof(header), 0));
  if (header[0] < 0) return out;
  RETURN_IF_ERROR(
      g.ctl->Broadcast(params, size * static_cast<int64_t>(sizeof(float)), /*root=*/0));
  out.restored = true;
  out.step = header[0];
  out.epoch = header[1];
  out.samples_in_epoch = header[2];
  out.source = 0;
  out.received = g.world();
  noted_[0] = {out.step, out.epoch, out.samples_in_epoch};
  noted_[1] = Position{};
  return out;
}

int64_t ServerRecovery::RecoverOnRank0(Generation& g, const int64_t* all, int64_t committed_step,
                                       float* params, Position* chosen) {
  auto* servers = dynamic_cast<sync::ServerSideCheckpoint*>(g.sync.get());
  // Every noted step newer than the commit, newest first, with a position.
  std::vector<Position> candidates;
  for (int r = 0; r < g.world(); ++r) {
    const int64_t* f = all + static_cast<size_t>(r) * kFields;
    for (int k = 0; k < 2; ++k) {
      const Position p{f[kStep0 + 3 * k], f[kEpoch0 + 3 * k], f[kSamples0 + 3 * k]};
      if (p.step < 1 || p.step < committed_step) continue;
      bool seen = false;
      for (const Position& c : candidates) seen = seen || c.step == p.step;
      if (!seen) candidates.push_back(p);
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Position& a, const Position& b) { return a.step > b.step; });
  for (const Position& c : candidates) {
    absl::StatusOr<std::vector<int>> from_replica = servers->RecoverFromServers(c.step, params);
    if (!from_replica.ok()) {
      LOG(INFO) << "shard-server memory does not hold step " << c.step << ": "
                << from_replica.status();
      continue;
    }
    LOG(INFO) << "rebuilt step " << c.step << " from shard-server memory"
              << (from_replica->empty()
                      ? std::string(" (every range from its own server)")
                      : absl::StrCat(" (server(s) ", absl::StrJoin(*from_replica, ", "),
                                     " from their replicas)"));
    *chosen = c;
    return c.step;
  }
  if (!candidates.empty()) {
    LOG(INFO) << "shard-server memory holds none of the steps the ranks completed: resuming "
                 "from the last checkpoint";
  }
  return -1;
}

}  // namespace worker
}  // namespace tandem
