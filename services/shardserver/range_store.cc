#include "services/shardserver/range_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/codec/int8_codec.h"
#include "common/log/log.h"
#include "common/shard/optimizer_config.h"
#include "common/status/status_macros.h"
#include "common/timing/seconds_since.h"

namespace tandem {
namespace shardserver {

// One chunk's accumulator: the sum of the contributions of the step it
// collects, which ranks gave them, and the optimizer over its elements.
struct ChunkSlot {
  shard::Chunk range;
  std::unique_ptr<optim::Optimizer> optimizer;  // over [range.lo, range.hi)
  absl::Mutex mu;
  int64_t step ABSL_GUARDED_BY(mu) = 0;  // the step being collected
  int64_t applied ABSL_GUARDED_BY(mu) = 0;  // apply_per_chunk: last step applied here
  std::vector<float> sum ABSL_GUARDED_BY(mu);
  std::vector<char> contributed ABSL_GUARDED_BY(mu);  // per rank
  int weight ABSL_GUARDED_BY(mu) = 0;
  // Int8 delta pulls: the block of the delta of step `encoded_step`
  // (-1: none, e.g. dropped by a reset), sized once.
  std::vector<uint8_t> encoded ABSL_GUARDED_BY(mu);
  int64_t encoded_step ABSL_GUARDED_BY(mu) = -1;
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

namespace {

// Buffer `name` of one chunk's optimizer, or an empty span.
absl::Span<float> StateOf(optim::Optimizer& o, const std::string& name, bool* found) {
  for (const optim::StateBuffer& b : o.state()) {
    if (b.name == name) {
      *found = true;
      return b.data;
    }
  }
  *found = false;
  return {};
}

// Copies between the chunks' buffers `name` over [lo, hi) and `flat`, which
// holds hi - lo floats (element 0 is element lo). to_chunks: flat -> chunks.
absl::Status CopyState(std::vector<std::unique_ptr<ChunkSlot>>& chunks, const std::string& name,
                       int64_t lo, int64_t hi, float* flat, bool to_chunks) {
  for (const std::unique_ptr<ChunkSlot>& s : chunks) {
    const int64_t a = std::max(lo, s->range.lo), b = std::min(hi, s->range.hi);
    if (b <= a) continue;
    bool found = false;
    absl::Span<float> buf = StateOf(*s->optimizer, name, &found);
    if (!found) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer state '", name, "': the ",
                                                     s->optimizer->name(),
                                                     " optimizer has no such buffer"));
    }
    float* in_chunk = buf.data() + (a - s->range.lo);
    if (to_chunks) {
      std::memcpy(in_chunk, flat + (a - lo), (b - a) * sizeof(float));
    } else {
      std::memcpy(flat + (a - lo), in_chunk, (b - a) * sizeof(float));
    }
  }
  return absl::OkStatus();
}

// sum[i] += data[i]; the buffers never overlap (the chunk's accumulator and
// a received message).
void AddInto(float* __restrict sum, const float* __restrict data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] += data[i];
}

// Int8 delta pulls: after chunk `slot`'s optimizer step, its delta
// (master - reference, staged in the slot's free accumulator) is encoded
// and the decoded delta added to the reference. Caller holds slot.mu.
void EncodeDelta(const codec::Codec& codec, const float* params, float* reference, ChunkSlot& slot,
                 int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu) {
  const int64_t n = slot.range.size();
  float* delta = slot.sum.data();
  for (int64_t i = 0; i < n; ++i) delta[i] = params[i] - reference[i];
  codec.Encode(delta, n, codec::EncodeParams{}, slot.encoded.data());
  codec.DecodeAdd(slot.encoded.data(), n, reference);
  slot.encoded_step = step;
}

void Add(prometheus::Counter* c, double v) {
  if (c != nullptr) c->Increment(v);
}
void GaugeAdd(prometheus::Gauge* g, double v) {
  if (g != nullptr) g->Increment(v);
}


// Chunk `slot`'s optimizer step on its summed gradient, the int8 delta for
// pulls, and the slot reset for step + 1. Shared by the whole-step apply and
// the per-chunk apply. Caller holds slot.mu.
absl::Status StepChunkLocked(RangeStore::State& st, ChunkSlot& slot,
                             const optim::StepContext& ctx)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(slot.mu);

// Push checks that need no lock: the rank, weight and scalars are sane and
// [lo, hi) is one of this server's chunks (its index in *chunk).
absl::Status CheckPushHeader(const RangeStore::State& st, const PushHeader& h, const float* data,
                             int64_t n, const std::string& where, int* chunk);

}  // namespace

RangeStore::RangeStore(const ShardMetrics* metrics) : metrics_(metrics) {}

RangeStore::~RangeStore() {
  absl::MutexLock lock(&mu_);
  if (current_ != nullptr) {
    absl::MutexLock s(&current_->mu);
    current_->retired = true;
    current_->applied_cv.SignalAll();
  }
}

RangeStore::PendingInit::~PendingInit() = default;

const InitConfig& RangeStore::PendingInit::config() const { return state_->config; }

absl::Status RangeStore::PendingInit::Fill(int64_t lo, const float* data, int64_t n) {
  const optim::ParamRange r = state_->config.range;
  if (n < 0 || lo < r.lo || lo + n > r.hi) {
    return absl::InvalidArgumentError(absl::StrCat("InitShard: parameters [", lo, ", ", lo + n,
                                                   ") lie outside this server's range [", r.lo,
                                                   ", ", r.hi, ")"));
  }
  if (n > 0 && data == nullptr) return absl::InvalidArgumentError("InitShard: no data");
  std::memcpy(state_->params.data() + (lo - r.lo), data, n * sizeof(float));
  for (int64_t i = lo - r.lo; i < lo - r.lo + n; ++i) {
    if (!filled_[i]) {
      filled_[i] = true;
      ++filled_elements_;
    }
  }
  return absl::OkStatus();
}

absl::Status RangeStore::PendingInit::FillState(const std::string& name, int64_t lo,
                                                const float* data, int64_t n) {
  const optim::ParamRange r = state_->config.range;
  if (n < 0 || lo < r.lo || lo + n > r.hi || (n > 0 && data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("InitShard: state '", name, "' for [", lo, ", ",
                                                   lo + n, ") lies outside this server's range [",
                                                   r.lo, ", ", r.hi, ")"));
  }
  RETURN_IF_ERROR(CopyState(state_->chunks, name, lo, lo + n, const_cast<float*>(data), true));
  std::vector<bool>* filled = nullptr;
  for (auto& [k, v] : state_filled_) {
    if (k == name) filled = &v;
  }
  if (filled == nullptr) {
    state_filled_.push_back({name, std::vector<bool>(r.size(), false)});
    filled = &state_filled_.back().second;
  }
  for (int64_t i = lo - r.lo; i < lo - r.lo + n; ++i) (*filled)[i] = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RangeStore::PendingInit>> RangeStore::BeginInit(
    const InitConfig& c) {
  if (c.generation < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("InitShard: generation must be >= 1, got ", c.generation));
  }
  if (c.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("InitShard: step must be >= 0, got ", c.step));
  }
  if (c.range.lo < 0 || c.range.hi < c.range.lo) {
    return absl::InvalidArgumentError(
        absl::StrCat("InitShard: bad range [", c.range.lo, ", ", c.range.hi, ")"));
  }
  if (c.chunk_elements < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("InitShard: chunk_elements must be >= 1, got ", c.chunk_elements));
  }
  if (c.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("InitShard: world_size must be >= 1, got ", c.world_size));
  }
  if (c.pull_int8_chunk != 0 && (c.pull_int8_chunk < 256 || c.pull_int8_chunk > 2048)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "InitShard: pull_int8_chunk must be 0 (fp32 pulls) or 256..2048, got ",
        c.pull_int8_chunk));
  }
  auto state = std::make_shared<State>();
  state->config = c;
  state->params.assign(c.range.size(), 0.f);
  if (c.pull_int8_chunk > 0) {
    state->codec = codec::MakeInt8Codec({.chunk = c.pull_int8_chunk});
    state->reference.assign(c.range.size(), 0.f);
  }
  for (const shard::Chunk& ch : shard::ShardLayout::CutRange(c.range.lo, c.range.hi,
                                                              c.chunk_elements, 0)) {
    auto slot = std::make_unique<ChunkSlot>();
    slot->range = ch;
    ASSIGN_OR_RETURN(slot->optimizer,
                     shard::BuildOptimizer(c.optimizer, optim::ParamRange{ch.lo, ch.hi}));
    {
      absl::MutexLock lock(&slot->mu);
      slot->step = c.step + 1;
      slot->applied = c.step;
      slot->sum.assign(ch.size(), 0.f);
      slot->contributed.assign(c.world_size, 0);
      if (state->codec != nullptr) slot->encoded.assign(state->codec->MaxEncodedBytes(ch.size()), 0);
    }
    state->chunk_lo.push_back(ch.lo);
    state->chunks.push_back(std::move(slot));
  }
  {
    absl::MutexLock lock(&state->mu);
    state->applied = c.step;
    state->chunk_applied.assign(state->chunks.size(), c.step);
  }
  std::unique_ptr<PendingInit> p(new PendingInit());
  p->state_ = std::move(state);
  p->filled_.assign(c.range.size(), false);
  return p;
}

absl::StatusOr<bool> RangeStore::CommitInit(std::unique_ptr<PendingInit> init) {
  State& next = *init->state_;
  const InitConfig& c = next.config;
  if (init->filled_elements_ != c.range.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "InitShard: only ", init->filled_elements_, " of the range's ", c.range.size(),
        " parameters were sent; nothing changed"));
  }
  for (const auto& [name, filled] : init->state_filled_) {
    if (std::count(filled.begin(), filled.end(), true) != c.range.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "InitShard: optimizer state '", name, "' covers only part of the range [", c.range.lo,
          ", ", c.range.hi, "); nothing changed"));
    }
  }
  const bool state_sent = !init->state_filled_.empty();
  // The workers hold what was sent.
  if (next.codec != nullptr) next.reference = next.params;
  absl::MutexLock lock(&mu_);
  bool kept = false;
  if (current_ != nullptr) {
    State& old = *current_;
    if (c.generation < old.config.generation) {
      return absl::FailedPreconditionError(absl::StrCat(
          "InitShard for generation ", c.generation, " but this server is at generation ",
          old.config.generation, ": a stale worker; nothing changed"));
    }
    // Pulls that start after this point see the new state; the old one's
    // waiters end. Its pushes in flight finish on the old buffers.
    absl::MutexLock params(&old.params_mu);
    absl::MutexLock s(&old.mu);
    const bool same = old.config.range.lo == c.range.lo && old.config.range.hi == c.range.hi &&
                      old.config.chunk_elements == c.chunk_elements &&
                      old.config.world_size == c.world_size &&
                      shard::SameOptimizer(old.config.optimizer, c.optimizer) &&
                      old.applied == c.step && old.complete == 0 && !old.retired &&
                      !state_sent;
    if (same) {
      for (size_t i = 0; i < next.chunks.size(); ++i) {
        next.chunks[i]->optimizer = std::move(old.chunks[i]->optimizer);
      }
      kept = true;
    }
    old.retired = true;
    old.applied_cv.SignalAll();
  }
  if (metrics_ != nullptr && metrics_->chunks_waiting != nullptr) metrics_->chunks_waiting->Set(0);
  current_ = std::move(init->state_);
  LOG(INFO) << "shard server: generation " << c.generation << ", step " << c.step << ", "
            << current_->Describe() << ", world " << c.world_size << ", " << c.optimizer.name()
            << (kept ? " (optimizer state kept)"
                     : state_sent ? " (optimizer state as sent)" : " (optimizer state from zeros)");
  return kept;
}

absl::StatusOr<std::shared_ptr<RangeStore::State>> RangeStore::Current(int64_t generation,
                                                                       const char* what) const {
  // ABORTED: the caller's generation cannot go on here (the server was
  // restarted, or the caller is stale); workers treat it as a membership
  // change, re-join, and the next generation initialises the server again.
  absl::MutexLock lock(&mu_);
  if (current_ == nullptr) {
    return absl::AbortedError(absl::StrCat(
        what, " for generation ", generation,
        ": this shard server holds no parameters (restarted?); rank 0 sends InitShard at the "
        "next generation's first step"));
  }
  const int64_t at = current_->config.generation;
  if (generation != at) {
    return absl::AbortedError(absl::StrCat(
        what, " for generation ", generation, " but this server is at generation ", at,
        generation < at ? ": that generation is over" : ": not initialised for it yet"));
  }
  return current_;
}

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
  if (*summed == SlotSum::kComplete) {
    if (st.config.apply_per_chunk) {
      ApplyChunk(st, ci, h.step);
    } else {
      ApplyStepIfComplete(st, h.step);
    }
  }
  return PushOutcome::kSummed;
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
  float* sum = slot.sum.data();
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
  absl::Status r =
      slot.optimizer->Step(st.params.data() + at, slot.sum.data(), slot.range.size(), ctx);
  if (st.codec != nullptr) {
    EncodeDelta(*st.codec, st.params.data() + at, st.reference.data() + at, slot, ctx.step);
  }
  std::fill(slot.contributed.begin(), slot.contributed.end(), 0);
  slot.weight = 0;
  slot.step = ctx.step + 1;
  return r;
}

}  // namespace

void RangeStore::ApplyStepIfComplete(State& st, int64_t step) {
  const InitConfig& c = st.config;
  double lr = 0, grad_scale = 1;
  {
    absl::MutexLock lock(&st.mu);
    if (++st.complete != static_cast<int>(st.chunks.size())) return;
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
    ctx.lr = static_cast<float>(st.lr);
    ctx.grad_scale = static_cast<float>(st.grad_scale / c.world_size);
  }
  absl::Status r;
  {
    absl::MutexLock lock(&slot.mu);
    r = StepChunkLocked(st, slot, ctx);
    slot.applied = step;
  }
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

absl::Status RangeStore::WaitForStep(int64_t generation, int64_t step, absl::Time deadline,
                                     int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(std::shared_ptr<State> cur, Current(generation, "pull"));
  State& st = *cur;
  absl::MutexLock lock(&st.mu);
  if (st.config.apply_per_chunk && lo < hi) {
    // Only the chunks of [lo, hi) need to be applied.
    int first = std::max(0, st.FindChunk(lo));
    auto chunk_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
      for (int i = first; i < static_cast<int>(st.chunks.size()) && st.chunks[i]->range.lo < hi;
           ++i) {
        if (st.chunk_applied[i] < step) return false;
      }
      return true;
    };
    while (!st.retired && !chunk_done()) {
      if (st.applied_cv.WaitWithDeadline(&st.mu, deadline)) break;
    }
    if (st.retired) {
      return absl::AbortedError(absl::StrCat("pull of step ", step, ": generation ", generation,
                                             " was replaced while waiting"));
    }
    if (st.applied > step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pull of step ", step, ": the server has applied step ", st.applied,
          " since (only the latest parameters are kept)"));
    }
    if (!chunk_done()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "pull of [", lo, ", ", hi, ") at step ", step,
          ": not applied before the deadline (a worker has not pushed it)"));
    }
    return absl::OkStatus();
  }
  while (!st.retired && st.applied < step) {
    if (st.applied_cv.WaitWithDeadline(&st.mu, deadline)) break;
  }
  if (st.retired) {
    return absl::AbortedError(absl::StrCat("pull of step ", step, ": generation ", generation,
                                           " was replaced while waiting"));
  }
  if (st.applied > step) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pull of step ", step, ": the server has applied step ", st.applied,
        " since (only the latest parameters are kept)"));
  }
  if (st.applied < step) {
    return absl::DeadlineExceededError(absl::StrCat(
        "pull of step ", step, ": not applied before the deadline (last applied ", st.applied,
        "; ", st.complete, " of ", st.chunks.size(),
        " chunks have every contribution: a worker has not pushed)"));
  }
  return absl::OkStatus();
}

absl::Status RangeStore::ReadParams(int64_t generation, int64_t step, int64_t lo, int64_t hi,
                                    float* out, bool reset_reference) {
  ASSIGN_OR_RETURN(std::shared_ptr<State> cur, Current(generation, "pull"));
  State& st = *cur;
  const optim::ParamRange r = st.config.range;
  if (lo < r.lo || hi > r.hi || lo > hi) {
    return absl::InvalidArgumentError(absl::StrCat("pull of [", lo, ", ", hi,
                                                   ") outside this server's range [", r.lo, ", ",
                                                   r.hi, ")"));
  }
  if (reset_reference && st.codec == nullptr) {
    return absl::InvalidArgumentError(
        "pull with reset_delta_reference: this generation was initialised without int8 delta "
        "pulls (pull_int8_chunk 0)");
  }
  // Chunk by chunk, each under its own lock (its optimizer may run with
  // apply_per_chunk; the reference is per chunk either way).
  auto copy_chunks = [&](bool check_step) -> absl::Status {
    for (int i = std::max(0, st.FindChunk(lo));
         i < static_cast<int>(st.chunks.size()) && st.chunks[i]->range.lo < hi; ++i) {
      ChunkSlot& s = *st.chunks[i];
      const int64_t a = std::max(lo, s.range.lo), b = std::min(hi, s.range.hi);
      if (b <= a) continue;
      absl::MutexLock lock(&s.mu);
      if (check_step && s.applied != step) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pull of step ", step, ": chunk [", s.range.lo, ", ", s.range.hi, ") is at step ",
            s.applied));
      }
      std::memcpy(out + (a - lo), st.params.data() + (a - r.lo), (b - a) * sizeof(float));
      if (reset_reference) {
        std::memcpy(st.reference.data() + (a - r.lo), st.params.data() + (a - r.lo),
                    (b - a) * sizeof(float));
        s.encoded_step = -1;
      }
    }
    return absl::OkStatus();
  };
  if (st.config.apply_per_chunk) return copy_chunks(/*check_step=*/true);
  absl::ReaderMutexLock params(&st.params_mu);
  {
    absl::MutexLock lock(&st.mu);
    if (st.applied != step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pull of step ", step, ": the server's parameters are at step ", st.applied));
    }
  }
  if (reset_reference) return copy_chunks(/*check_step=*/false);
  std::memcpy(out, st.params.data() + (lo - r.lo), (hi - lo) * sizeof(float));
  return absl::OkStatus();
}

absl::Status RangeStore::ReadDelta(int64_t generation, int64_t step, int64_t lo, int64_t hi,
                                   std::string* out) {
  ASSIGN_OR_RETURN(std::shared_ptr<State> cur, Current(generation, "delta pull"));
  State& st = *cur;
  if (st.codec == nullptr) {
    return absl::InvalidArgumentError(
        "int8 pull: this generation was initialised without int8 delta pulls (pull_int8_chunk 0); "
        "pull DTYPE_F32");
  }
  const int ci = st.FindChunk(lo);
  if (ci < 0 || st.chunks[ci]->range.lo != lo || st.chunks[ci]->range.hi != hi) {
    return absl::InvalidArgumentError(absl::StrCat("int8 pull of [", lo, ", ", hi,
                                                   "): not one of this server's chunks (",
                                                   st.Describe(), ")"));
  }
  std::unique_ptr<absl::ReaderMutexLock> params;
  if (!st.config.apply_per_chunk) params = std::make_unique<absl::ReaderMutexLock>(&st.params_mu);
  ChunkSlot& s = *st.chunks[ci];
  absl::MutexLock lock(&s.mu);
  if (s.encoded_step != step) {
    return absl::FailedPreconditionError(absl::StrCat(
        "int8 pull of [", lo, ", ", hi, ") at step ", step, ": the chunk holds ",
        s.encoded_step < 0 ? std::string("no delta (reset by a full-precision pull, or none "
                                         "applied yet)")
                           : absl::StrCat("the delta of step ", s.encoded_step)));
  }
  out->assign(reinterpret_cast<const char*>(s.encoded.data()), s.encoded.size());
  return absl::OkStatus();
}

absl::Status RangeStore::ReadState(int64_t generation, int64_t step, const std::string& name,
                                   int64_t lo, int64_t hi, float* out) {
  ASSIGN_OR_RETURN(std::shared_ptr<State> cur, Current(generation, "state pull"));
  State& st = *cur;
  const optim::ParamRange r = st.config.range;
  if (lo < r.lo || hi > r.hi || lo > hi) {
    return absl::InvalidArgumentError(absl::StrCat("state pull of [", lo, ", ", hi,
                                                   ") outside this server's range [", r.lo, ", ",
                                                   r.hi, ")"));
  }
  absl::ReaderMutexLock params(&st.params_mu);
  {
    absl::MutexLock lock(&st.mu);
    if (st.applied != step || st.complete != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "state pull of step ", step, ": the server's state is at step ", st.applied,
          st.complete != 0 ? " with the next step partly applied" : ""));
    }
  }
  return CopyState(st.chunks, name, lo, hi, out, false);
}

StoreInfo RangeStore::info() const {
  absl::MutexLock lock(&mu_);
  StoreInfo i;
  if (current_ == nullptr) return i;
  const InitConfig& c = current_->config;
  i.job_id = c.job_id;
  i.generation = c.generation;
  i.range = c.range;
  i.chunk_elements = c.chunk_elements;
  i.chunks = current_->chunks.size();
  i.world_size = c.world_size;
  i.optimizer = c.optimizer;
  absl::MutexLock s(&current_->mu);
  i.step = current_->applied;
  return i;
}

}  // namespace shardserver
}  // namespace tandem
