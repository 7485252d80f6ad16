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
#include "services/shardserver/range_state.h"

namespace tandem {
namespace shardserver {

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

}  // namespace

RangeStore::RangeStore(const ShardMetrics* metrics, int apply_threads)
    : metrics_(metrics),
      apply_(std::make_unique<ApplyQueue>(std::max(0, apply_threads),
                                          [this](const ApplyJob& j) { RunApply(j); })) {}

RangeStore::~RangeStore() {
  {
    // Retired first: a queued step waiting for its replica's acknowledgement
    // (the forwarder may be stopped by now) goes ahead.
    absl::MutexLock lock(&mu_);
    if (current_ != nullptr) {
      absl::MutexLock s(&current_->mu);
      current_->retired = true;
      current_->applied_cv.SignalAll();
    }
  }
  apply_.reset();  // the queued steps run first
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
    slot->state = slot->optimizer->state();
    {
      absl::MutexLock lock(&slot->mu);
      slot->step = c.step + 1;
      slot->applied = c.step;
      slot->sum.assign(ch.size() * sizeof(float), '\0');
      slot->contributed.assign(c.world_size, 0);
      if (state->codec != nullptr) slot->encoded.assign(state->codec->MaxEncodedBytes(ch.size()), 0);
      if (!c.replica_address.empty()) {
        const size_t buffers = 1 + slot->state.size();
        slot->keeps = true;
        for (std::vector<std::string>& v : slot->kept) {
          v.assign(buffers, std::string(ch.size() * sizeof(float), '\0'));
        }
        slot->grad.assign(ch.size() * sizeof(float), '\0');
      }
    }
    state->chunk_lo.push_back(ch.lo);
    state->chunks.push_back(std::move(slot));
  }
  {
    absl::MutexLock lock(&state->mu);
    state->applied = c.step;
    state->chunk_applied.assign(state->chunks.size(), c.step);
    if (!c.replica_address.empty()) state->chunk_replicated.assign(state->chunks.size(), -1);
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
        next.chunks[i]->state = next.chunks[i]->optimizer->state();
      }
      kept = true;
    }
    old.retired = true;
    old.applied_cv.SignalAll();
  }
  if (metrics_ != nullptr && metrics_->chunks_waiting != nullptr) metrics_->chunks_waiting->Set(0);
  current_ = std::move(init->state_);
  // The replica gets the initial state too: a server lost during the
  // first step is rebuilt from it.
  Forward(*current_, 0, static_cast<int>(current_->chunks.size()), c.step);
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
  RETURN_IF_ERROR(CheckInRange(r, lo, hi, "pull"));
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
  RETURN_IF_ERROR(CheckInRange(r, lo, hi, "state pull"));
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
