// Internal to the range store (range_store.cc, range_store_push.cc): one
// generation's state (RangeStore::State) and one chunk's accumulator
// (ChunkSlot), with the small helpers both files use. Locking is documented
// on the members (ABSL_GUARDED_BY); lock order: State::params_mu, then
// State::mu, then a ChunkSlot::mu.
#ifndef TANDEM_SERVICES_SHARDSERVER_RANGE_STATE_H_
#define TANDEM_SERVICES_SHARDSERVER_RANGE_STATE_H_

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/codec/codec.h"
#include "common/optim/optimizer.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "services/shardserver/range_store.h"

namespace tandem {
namespace shardserver {

// [lo, hi) inside `r`, or INVALID_ARGUMENT naming the request (`what`: "pull",
// "state pull", "recovery read") and this server's range.
inline absl::Status CheckInRange(const optim::ParamRange& r, int64_t lo, int64_t hi,
                                 const char* what) {
  if (lo >= r.lo && hi <= r.hi && lo <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " of [", lo, ", ", hi,
                                                 ") outside this server's range [", r.lo, ", ",
                                                 r.hi, ")"));
}

// One chunk's accumulator: the sum of the contributions of the step it
// collects, which ranks gave them, and the optimizer over its elements.
struct ChunkSlot {
  shard::Chunk range;
  std::unique_ptr<optim::Optimizer> optimizer;  // over [range.lo, range.hi)
  std::vector<optim::StateBuffer> state;        // optimizer->state(), taken once
  absl::Mutex mu;
  int64_t step ABSL_GUARDED_BY(mu) = 0;  // the step being collected
  int64_t applied ABSL_GUARDED_BY(mu) = 0;  // apply_per_chunk: last step applied here
  // The step's summed gradient (chunk-size floats as bytes: with a
  // replica it is swapped, not copied, into `grad` and from there into the
  // replication message).
  std::string sum ABSL_GUARDED_BY(mu);
  std::vector<char> contributed ABSL_GUARDED_BY(mu);  // per rank
  int weight ABSL_GUARDED_BY(mu) = 0;
  // Int8 delta pulls: the block of the delta of step `encoded_step`
  // (-1: none, e.g. dropped by a reset), sized once.
  std::vector<uint8_t> encoded ABSL_GUARDED_BY(mu);
  int64_t encoded_step ABSL_GUARDED_BY(mu) = -1;
  // Range replication: the chunk as it was before each of its last two
  // steps (kept[k], at step prev_step[k]; -1: none yet; buffer 0 the
  // parameters, 1 + j optimizer state buffer j, each chunk-size floats as
  // bytes), so a recovery can roll this range back two steps: the replica
  // of a lost neighbour may lag its primary by one step (replicator.h).
  // Sized once at init; empty without a replica (keeps == false).
  bool keeps ABSL_GUARDED_BY(mu) = false;
  std::vector<std::string> kept[2] ABSL_GUARDED_BY(mu);
  int64_t prev_step[2] ABSL_GUARDED_BY(mu) = {-1, -1};
  // The summed gradient of step grad_step (-1: none, e.g. the step of an
  // InitShard) with the scalars it was applied with: what the replica is
  // sent for that step (replica_store.h). Swapped with `sum` after the
  // optimizer step; lent to the replication message between
  // ReadChunkForReplica and MarkReplicated (grad_lent), during which the
  // chunk cannot step again (it waits for the replica's acknowledgement).
  std::string grad ABSL_GUARDED_BY(mu);
  int64_t grad_step ABSL_GUARDED_BY(mu) = -1;
  float grad_lr ABSL_GUARDED_BY(mu) = 0;
  float grad_scale ABSL_GUARDED_BY(mu) = 1;
  bool grad_lent ABSL_GUARDED_BY(mu) = false;
};

struct RangeStore::State {
  InitConfig config;
  std::vector<std::unique_ptr<ChunkSlot>> chunks;
  std::vector<int64_t> chunk_lo;  // for lookup
  std::vector<float> params;      // config.range
  // Int8 delta pulls (config.pull_int8_chunk > 0): what the workers hold,
  // over config.range; each chunk's part under its ChunkSlot::mu.
  std::unique_ptr<codec::Codec> codec;
  std::vector<float> reference;

  // Held for writing while the optimizer runs, for reading while a pull
  // copies parameters out (order: params_mu, then mu).
  absl::Mutex params_mu;
  absl::Mutex mu;
  absl::CondVar applied_cv;
  int64_t applied ABSL_GUARDED_BY(mu) = 0;  // last applied step
  int complete ABSL_GUARDED_BY(mu) = 0;     // chunks complete for applied + 1
  std::vector<int64_t> chunk_applied ABSL_GUARDED_BY(mu);  // per chunk (apply_per_chunk)
  bool have_scalars ABSL_GUARDED_BY(mu) = false;
  double lr ABSL_GUARDED_BY(mu) = 0;
  double grad_scale ABSL_GUARDED_BY(mu) = 1;
  bool retired ABSL_GUARDED_BY(mu) = false;
  // Range replication: per chunk, the newest step its replica acknowledged
  // (step S + 1 of a chunk is applied only once it is >= S); empty without
  // a replica.
  std::vector<int64_t> chunk_replicated ABSL_GUARDED_BY(mu);

  bool replicated() const { return !config.replica_address.empty(); }
  // Chunks [first, last) may apply `step`: their replicas hold step - 1.
  bool ReplicaCaughtUp(int first, int last, int64_t step) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (chunk_replicated.empty()) return true;
    for (int i = first; i < last; ++i) {
      if (chunk_replicated[i] < step - 1) return false;
    }
    return true;
  }

  int FindChunk(int64_t lo) const {
    auto it = std::upper_bound(chunk_lo.begin(), chunk_lo.end(), lo);
    if (it == chunk_lo.begin()) return -1;
    return static_cast<int>(it - chunk_lo.begin()) - 1;
  }

  std::string Describe() const {
    return absl::StrCat("[", config.range.lo, ", ", config.range.hi, ") in ", chunks.size(),
                        " chunk(s) of <= ", config.chunk_elements, " elements");
  }
};

// A buffer of floats kept as bytes (so it can be swapped into a message).
inline float* Floats(std::string& s) { return reinterpret_cast<float*>(s.data()); }

// sum[i] += data[i]; the buffers never overlap (the chunk's accumulator and
// a received message).
inline void AddInto(float* __restrict sum, const float* __restrict data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] += data[i];
}

// Int8 delta pulls: after chunk `slot`'s optimizer step, its delta
// (master - reference, staged in the slot's free accumulator) is encoded
// and the decoded delta added to the reference. Caller holds slot.mu.
inline void EncodeDelta(const codec::Codec& codec, const float* params, float* reference, ChunkSlot& slot,
                 int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu) {
  const int64_t n = slot.range.size();
  float* delta = Floats(slot.sum);
  for (int64_t i = 0; i < n; ++i) delta[i] = params[i] - reference[i];
  codec.Encode(delta, n, codec::EncodeParams{}, slot.encoded.data());
  codec.DecodeAdd(slot.encoded.data(), n, reference);
  slot.encoded_step = step;
}

// Range replication: keeps the chunk's parameters and optimizer state as
// they are (before the step about to be applied) in the older of
// slot.kept's two versions.
inline void KeepPrevious(const float* params, ChunkSlot& slot)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu) {
  if (!slot.keeps) return;
  const int k = slot.prev_step[0] <= slot.prev_step[1] ? 0 : 1;
  slot.prev_step[k] = slot.applied;
  const size_t bytes = slot.range.size() * sizeof(float);
  std::vector<std::string>& to = slot.kept[k];
  std::memcpy(to[0].data(), params, bytes);
  for (size_t j = 0; j < slot.state.size(); ++j) {
    std::memcpy(to[1 + j].data(), slot.state[j].data.data(), bytes);
  }
}

// Range replication, after the optimizer applied `ctx` to the slot's sum:
// the sum becomes the gradient the replica is sent (a swap) and the old
// gradient buffer, which the replica has acknowledged, collects the next
// step.
inline void KeepGradient(ChunkSlot& slot, const optim::StepContext& ctx)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu) {
  if (!slot.keeps) return;
  if (slot.grad_lent) {  // never while the chunk waits for its replica; no gradient then
    slot.grad_step = -1;
    return;
  }
  slot.grad.resize(slot.sum.size());  // a no-op but after a generation's buffers mixed
  slot.sum.swap(slot.grad);
  slot.grad_step = ctx.step;
  slot.grad_lr = ctx.lr;
  slot.grad_scale = ctx.grad_scale;
}

inline void Add(prometheus::Counter* c, double v) {
  if (c != nullptr) c->Increment(v);
}
inline void GaugeAdd(prometheus::Gauge* g, double v) {
  if (g != nullptr) g->Increment(v);
}

}  // namespace shardserver
}  // namespace tandem

#endif  // TANDEM_SERVICES_SHARDSERVER_RANGE_STATE_H_
