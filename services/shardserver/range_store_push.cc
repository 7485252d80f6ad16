// RangeStore's push path (range_store.h): the checks, the step's
// admission, the sum into the chunk's slot, and the optimizer step once the
// step (or, with apply_per_chunk, the chunk) is complete.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log/log.h"
#include "common/timing/seconds_since.h"
#include "services/shardserver/range_state.h"
#include "services/shardserver/range_store.h"

namespace tandem {
namespace shardserver {
namespace {

// Push checks that need no lock: the rank, weight and scalars are sane and
// [lo, hi) is one of this server's chunks (its index in *chunk).
absl::Status CheckPushHeader(const RangeStore::State& st, const PushHeader& h, const float* data,
                             int64_t n, const std::string& where, int* chunk);

// Chunk `slot`'s optimizer step on its summed gradient, the int8 delta for
// pulls, and the slot reset for step + 1. Shared by the whole-step apply and
// the per-chunk apply. Caller holds slot.mu.
absl::Status StepChunkLocked(RangeStore::State& st, ChunkSlot& slot,
                             const optim::StepContext& ctx)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu);

}  // namespace

absl::StatusOr<PushOutcome> RangeStore::Push(const PushHeader& h, const float* data, int64_t n) {
  auto refuse = [this](absl::Status s) -> absl::Status {
    if (metrics_ != nullptr) Add(metrics_->refused_pushes, 1);
    return s;
  };
  auto duplicate = [this] {
    if (metrics_ != nullptr) Add(metrics_->duplicate_pushes, 1);
    return PushOutcome::kDuplicate;
  };
  absl::StatusOr<std::shared_ptr<State>> cur = Current(h.generation, "push");
  if (!cur.ok()) return refuse(cur.status());
  State& st = **cur;
  const std::string where = absl::StrCat("push of [", h.lo, ", ", h.hi, ") for step ", h.step,
                                         " from rank ", h.rank);
  int ci = -1;
  if (absl::Status s = CheckPushHeader(st, h, data, n, where, &ci); !s.ok()) return refuse(s);
  absl::StatusOr<bool> admitted = AdmitStep(st, h, where);
  if (!admitted.ok()) return refuse(admitted.status());
  if (!*admitted) return duplicate();
  absl::StatusOr<SlotSum> summed = SumIntoSlot(st, *st.chunks[ci], h, data, n, where);
  if (!summed.ok()) return refuse(summed.status());
  if (*summed == SlotSum::kDuplicate) return duplicate();
  // The optimizer step leaves the receive path: this stream reads on.
  if (*summed == SlotSum::kComplete) apply_->Enqueue({*cur, ci, h.step});
  return PushOutcome::kSummed;
}

void RangeStore::RunApply(const ApplyJob& j) {
  State& st = *static_cast<State*>(j.state.get());
  if (st.config.apply_per_chunk) {
    ApplyChunk(st, j.chunk, j.step);
  } else {
    ApplyStepIfComplete(st, j.step);
  }
}

namespace {

absl::Status CheckPushHeader(const RangeStore::State& st, const PushHeader& h, const float* data,
                             int64_t n, const std::string& where, int* chunk) {
  const InitConfig& c = st.config;
  if (h.rank < 0 || h.rank >= c.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": rank outside [0, ", c.world_size, ")"));
  }
  if (h.weight < 1 || h.weight > c.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": weight ", h.weight, " outside [1, ", c.world_size, "]"));
  }
  if (!std::isfinite(h.learning_rate) || !std::isfinite(h.grad_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": learning rate ", h.learning_rate,
                                                   " and grad_scale ", h.grad_scale,
                                                   " must be finite"));
  }
  const int ci = st.FindChunk(h.lo);
  if (ci < 0 || st.chunks[ci]->range.lo != h.lo || st.chunks[ci]->range.hi != h.hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not one of this server's chunks (", st.Describe(),
                     "); the worker's shard layout differs from the one it initialised"));
  }
  if (n != h.hi - h.lo || (n > 0 && data == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": carries ", n, " values, the chunk has ", h.hi - h.lo));
  }
  *chunk = ci;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> RangeStore::AdmitStep(State& st, const PushHeader& h,
                                           const std::string& where) {
  absl::MutexLock lock(&st.mu);
  if (st.retired) return absl::AbortedError(absl::StrCat(where, ": generation replaced"));
  if (h.step <= st.applied) {
    if (h.step == st.applied) return false;  // summed before the step was applied
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": step ", h.step, " is long applied (server at ", st.applied, ")"));
  }
  if (h.step != st.applied + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": the server collects step ", st.applied + 1, " (step ", st.applied,
                     " is the last applied)"));
  }
  if (!st.have_scalars) {
    st.have_scalars = true;
    st.lr = h.learning_rate;
    st.grad_scale = h.grad_scale;
  } else if (st.lr != h.learning_rate || st.grad_scale != h.grad_scale) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": learning rate ", h.learning_rate, " / grad_scale ", h.grad_scale,
        " differ from this step's ", st.lr, " / ", st.grad_scale, " (ranks disagree)"));
  }
  return true;
}

absl::StatusOr<RangeStore::SlotSum> RangeStore::SumIntoSlot(State& st, ChunkSlot& slot,
                                                            const PushHeader& h,
                                                            const float* data, int64_t n,
                                                            const std::string& where) {
  const int world = st.config.world_size;
  absl::MutexLock lock(&slot.mu);
  if (h.step < slot.step || slot.contributed[h.rank]) return SlotSum::kDuplicate;
  if (slot.weight + h.weight > world) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": weight ", h.weight, " on top of ",
                                                   slot.weight, " exceeds the world size ",
                                                   world));
  }
  float* sum = Floats(slot.sum);
  if (slot.weight == 0) {
    std::memcpy(sum, data, n * sizeof(float));
    if (metrics_ != nullptr) GaugeAdd(metrics_->chunks_waiting, 1);
  } else {
    AddInto(sum, data, n);
  }
  slot.contributed[h.rank] = 1;
  slot.weight += h.weight;
  if (slot.weight != world) return SlotSum::kSummed;
  if (metrics_ != nullptr) GaugeAdd(metrics_->chunks_waiting, -1);
  return SlotSum::kComplete;
}

namespace {

absl::Status StepChunkLocked(RangeStore::State& st, ChunkSlot& slot,
                             const optim::StepContext& ctx) {
  const int64_t at = slot.range.lo - st.config.range.lo;
  KeepPrevious(st.params.data() + at, slot);
  absl::Status r =
      slot.optimizer->Step(st.params.data() + at, Floats(slot.sum), slot.range.size(), ctx);
  KeepGradient(slot, ctx);  // before EncodeDelta, which reuses the sum as scratch
  if (st.codec != nullptr) {
    EncodeDelta(*st.codec, st.params.data() + at, st.reference.data() + at, slot, ctx.step);
  }
  std::fill(slot.contributed.begin(), slot.contributed.end(), 0);
  slot.weight = 0;
  slot.step = ctx.step + 1;
  slot.applied = ctx.step;
  return r;
}

}  // namespace

bool RangeStore::AwaitReplica(State& st, int first, int last, int64_t step) {
  if (st.ReplicaCaughtUp(first, last, step)) return !st.retired;
  // Step - 1 is still on its way to the replica: the replica may lag this
  // range by one step, never two (replicator.h). Usually it arrived while
  // the workers computed this step's gradients, and nothing waits here.
  const auto start = std::chrono::steady_clock::now();
  while (!st.retired && !st.ReplicaCaughtUp(first, last, step)) st.applied_cv.Wait(&st.mu);
  if (metrics_ != nullptr) Add(metrics_->replica_wait_seconds, SecondsSince(start));
  return !st.retired;
}

void RangeStore::ApplyStepIfComplete(State& st, int64_t step) {
  const InitConfig& c = st.config;
  double lr = 0, grad_scale = 1;
  {
    absl::MutexLock lock(&st.mu);
    if (++st.complete != static_cast<int>(st.chunks.size())) return;
    if (!AwaitReplica(st, 0, static_cast<int>(st.chunks.size()), step)) return;
    lr = st.lr;
    grad_scale = st.grad_scale;
  }
  // Every chunk is complete: the one optimizer step of `step`.
  const auto start = std::chrono::steady_clock::now();
  optim::StepContext ctx;
  ctx.step = step;
  ctx.lr = static_cast<float>(lr);
  ctx.grad_scale = static_cast<float>(grad_scale / c.world_size);
  absl::Status failed;
  absl::MutexLock params(&st.params_mu);
  for (const std::unique_ptr<ChunkSlot>& s : st.chunks) {
    absl::MutexLock lock(&s->mu);
    absl::Status r = StepChunkLocked(st, *s, ctx);
    if (!r.ok() && failed.ok()) failed = r;
  }
  // Queued for the replica before any pull of `step` is answered, so the
  // replica receives every chunk's steps in the order the workers saw them.
  Forward(st, 0, static_cast<int>(st.chunks.size()), step);
  {
    absl::MutexLock lock(&st.mu);
    st.applied = step;
    st.complete = 0;
    st.have_scalars = false;
    st.applied_cv.SignalAll();
  }
  if (metrics_ != nullptr) {
    Add(metrics_->steps_applied, 1);
    Add(metrics_->optimizer_seconds, SecondsSince(start));
  }
  if (!failed.ok()) {
    // Checked before summing (finite lr, step >= 1), so this is a bug.
    LOG(ERROR) << "shard server: optimizer failed at step " << step << ": " << failed;
  }
}

void RangeStore::ApplyChunk(State& st, int ci, int64_t step) {
  const InitConfig& c = st.config;
  ChunkSlot& slot = *st.chunks[ci];
  const auto start = std::chrono::steady_clock::now();
  optim::StepContext ctx;
  ctx.step = step;
  {
    absl::MutexLock lock(&st.mu);
    if (!AwaitReplica(st, ci, ci + 1, step)) return;
    ctx.lr = static_cast<float>(st.lr);
    ctx.grad_scale = static_cast<float>(st.grad_scale / c.world_size);
  }
  absl::Status r;
  {
    absl::MutexLock lock(&slot.mu);
    r = StepChunkLocked(st, slot, ctx);
    slot.applied = step;
  }
  Forward(st, ci, ci + 1, step);  // before the pulls (see ApplyStepIfComplete)
  bool last = false;
  {
    absl::MutexLock lock(&st.mu);
    st.chunk_applied[ci] = step;
    last = ++st.complete == static_cast<int>(st.chunks.size());
    if (last) {
      st.applied = step;
      st.complete = 0;
      st.have_scalars = false;
    }
    st.applied_cv.SignalAll();
  }
  if (metrics_ != nullptr) {
    if (last) Add(metrics_->steps_applied, 1);
    Add(metrics_->optimizer_seconds, SecondsSince(start));
  }
  if (!r.ok()) LOG(ERROR) << "shard server: optimizer failed at step " << step << ": " << r;
}

}  // namespace shardserver
}  // namespace tandem
