#include "services/worker/peer_restore.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/status/status_macros.h"

namespace tandem {
namespace worker {
namespace {

constexpr int kSlots = 3;  // two own snapshots, the predecessor's copy

// Whether some survivor holds its own snapshot of `rank` (of generation g).
bool Survived(const std::vector<ReplicaOffer>& offers, int64_t generation, int64_t rank) {
  for (const ReplicaOffer& o : offers) {
    for (int i = 0; i < 2; ++i) {
      if (o.slot[i].generation == generation && o.slot[i].rank == rank) return true;
    }
  }
  return false;
}

// Finds, for every old rank, who sends its shard at `step`: the survivor
// holding its own snapshot, else the lowest new rank holding a copy.
bool FindSources(const std::vector<ReplicaOffer>& offers, int64_t generation, int64_t world,
                 int64_t step, PeerRestorePlan* plan, int64_t* missing) {
  plan->source.assign(world, -1);
  plan->slot.assign(world, -1);
  const int passes[2][2] = {{0, 2}, {2, kSlots}};  // own slots, then the held copy
  for (int64_t q = 0; q < world; ++q) {
    for (const auto& pass : passes) {
      for (size_t r = 0; r < offers.size() && plan->source[q] < 0; ++r) {
        for (int i = pass[0]; i < pass[1]; ++i) {
          const ReplicaMeta& m = offers[r].slot[i];
          if (m.generation == generation && m.rank == q && m.step == step) {
            plan->source[q] = static_cast<int>(r);
            plan->slot[q] = i;
            break;
          }
        }
      }
    }
    if (plan->source[q] < 0) {
      *missing = q;
      return false;
    }
  }
  return true;
}

}  // namespace

PeerRestorePlan PlanPeerRestore(const std::vector<ReplicaOffer>& offers, int64_t committed_step) {
  PeerRestorePlan plan;
  // Every (step, generation, world) any slot is of, newest step first: a
  // generation that failed before its own copies all arrived can still be
  // served by the previous generation's (the same trajectory: a disk
  // restore clears them).
  struct Candidate {
    int64_t step, generation, world;
    bool operator<(const Candidate& o) const {
      return step != o.step ? step > o.step : generation > o.generation;
    }
    bool operator==(const Candidate& o) const {
      return step == o.step && generation == o.generation;
    }
  };
  std::vector<Candidate> candidates;
  for (const ReplicaOffer& o : offers) {
    for (const ReplicaMeta& m : o.slot) {
      if (m.generation >= 0) candidates.push_back({m.step, m.generation, m.world});
    }
  }
  if (candidates.empty()) return plan;  // none taken (yet): nothing to say
  for (size_t r = 0; r < offers.size(); ++r) {
    if (offers[r].fits == 0) {
      plan.reason = absl::StrCat("rank ", r, "'s optimizer state does not match the replicas, or "
                                 "the model has registered buffers (not kept in replicas)");
      return plan;
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  for (const Candidate& c : candidates) {
    if (c.step < committed_step) {
      if (plan.reason.empty()) {
        plan.reason = absl::StrCat("the committed checkpoint (step ", committed_step,
                                   ") is newer than the peer replicas (step ", c.step, ")");
      }
      break;
    }
    int64_t missing = -1;
    if (FindSources(offers, c.generation, c.world, c.step, &plan, &missing)) {
      plan.step = c.step;
      plan.generation = c.generation;
      plan.reason.clear();
      return plan;
    }
    if (!plan.reason.empty()) continue;  // the newest step's reason is the one to tell
    const int64_t next = (missing + 1) % c.world;
    plan.reason = absl::StrCat("old rank ", missing, "'s shard at step ", c.step,
                               " is held by no survivor: ");
    absl::StrAppend(&plan.reason,
                    Survived(offers, c.generation, next)
                        ? absl::StrCat("rank ", next, " had not received its replica")
                        : absl::StrCat("rank ", next, ", which held its replica, was lost too"));
  }
  plan.source.clear();
  plan.slot.clear();
  return plan;
}

namespace {

// Old rank q's shard from plan.source[q] to every rank: the parameter slice
// into the flat vector, each optimizer buffer's part in this rank's range.
absl::Status SendShard(Generation& g, PeerReplica& replica, kernels::Backend* backend,
                       nn::Model* model, const PeerRestorePlan& plan, int q, ReplicaMeta* meta,
                       std::vector<float>* piece) {
  const int src = plan.source[q];
  const ReplicaSlot* slot = nullptr;
  if (g.rank() == src) {
    slot = plan.slot[q] < 2 ? &replica.own(plan.slot[q]) : &replica.held();
    *meta = slot->meta;
  }
  RETURN_IF_ERROR(g.ctl->Broadcast(meta, sizeof(*meta), src));
  const int64_t size = meta->hi - meta->lo;
  std::vector<optim::StateBuffer> buffers = g.sync->optimizer()->state();
  if (slot != nullptr &&
      static_cast<int64_t>(slot->data.size()) != size * static_cast<int64_t>(1 + buffers.size())) {
    return absl::InternalError(absl::StrCat("peer replica of rank ", q, " holds ",
                                            slot->data.size(), " floats, expected ",
                                            size * (1 + buffers.size())));
  }
  piece->resize(size);
  const optim::ParamRange owned = g.sync->owned_range();
  for (size_t b = 0; b <= buffers.size(); ++b) {  // b = 0: the parameters
    if (slot != nullptr) {
      std::copy(slot->data.begin() + b * size, slot->data.begin() + (b + 1) * size,
                piece->begin());
    }
    RETURN_IF_ERROR(g.ctl->Broadcast(piece->data(), size * sizeof(float), src));
    if (b == 0) {
      RETURN_IF_ERROR(backend->CopyToDevice(model->storage().params() + meta->lo, piece->data(),
                                            size * sizeof(float)));
      continue;
    }
    const int64_t a = std::max(meta->lo, owned.lo), z = std::min(meta->hi, owned.hi);
    if (z > a) {
      std::copy(piece->begin() + (a - meta->lo), piece->begin() + (z - meta->lo),
                buffers[b - 1].data.begin() + (a - owned.lo));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PeerRecovery> RestoreFromPeers(Generation& g, PeerReplica& replica,
                                              kernels::Backend* backend, nn::Model* model,
                                              int64_t committed_step) {
  replica.StopLink();  // the copies stay as they are from here on
  const size_t nbuf = g.sync->optimizer()->state().size();
  ReplicaOffer mine;
  const ReplicaSlot* slots[kSlots] = {&replica.own(0), &replica.own(1), &replica.held()};
  bool fits = model->SaveBuffers().empty();
  for (int i = 0; i < kSlots; ++i) {
    const ReplicaMeta& m = slots[i]->meta;
    mine.slot[i] = m;
    const int64_t floats = (m.hi - m.lo) * static_cast<int64_t>(1 + nbuf);
    if (m.generation >= 0 && static_cast<int64_t>(slots[i]->data.size()) != floats) fits = false;
  }
  mine.fits = fits ? 1 : 0;
  std::vector<ReplicaOffer> offers(g.world());
  RETURN_IF_ERROR(g.ctl->AllGather(&mine, offers.data(), sizeof(ReplicaOffer)));
  const PeerRestorePlan plan = PlanPeerRestore(offers, committed_step);
  PeerRecovery out;
  out.reason = plan.reason;
  if (plan.step < 0) return out;
  std::vector<float> piece;
  ReplicaMeta meta;
  for (int q = 0; q < static_cast<int>(plan.source.size()); ++q) {
    RETURN_IF_ERROR(SendShard(g, replica, backend, model, plan, q, &meta, &piece));
    if (q == 0) {
      out.epoch = meta.epoch;
      out.samples_in_epoch = meta.samples_in_epoch;
    }
    if (plan.slot[q] == 2) ++out.sent_by_neighbours;
  }
  out.restored = true;
  out.step = plan.step;
  out.source = plan.source[0];
  out.shards = static_cast<int>(plan.source.size());
  return out;
}

}  // namespace worker
}  // namespace tandem
