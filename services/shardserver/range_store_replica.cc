// RangeStore's side of range replication (range_store.h, replica_store.h):
// handing applied chunks to the forwarder, reading them for the replica,
// and the recovery reads of a kept step.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/shardserver/range_state.h"
#include "services/shardserver/range_store.h"

namespace tandem {
namespace shardserver {

namespace {

// Gives a gradient lent to `msg` (grad_lent) back to the chunk.
void TakeBackGradient(ChunkSlot& s, v1::ReplicaChunk* msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  if (!s.grad_lent || msg == nullptr) return;
  msg->mutable_grad()->mutable_data()->swap(s.grad);
  s.grad_lent = false;
}

// The message's state fields as `n` values each of the chunk's buffers
// (full) or empty (a gradient message); the objects are kept for reuse.
void ShapeState(const ChunkSlot& s, bool full, v1::ReplicaChunk* msg)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  const int want = full ? static_cast<int>(s.state.size()) : 0;
  while (msg->state_size() > want) msg->mutable_state()->RemoveLast();
  while (msg->state_names_size() > want) msg->mutable_state_names()->RemoveLast();
  while (msg->state_size() < want) msg->add_state();
  while (msg->state_names_size() < want) msg->add_state_names();
}

}  // namespace

void RangeStore::Forward(const State& st, int first, int last, int64_t step) {
  if (forwarder_ == nullptr || !st.replicated()) return;
  for (int i = first; i < last; ++i) forwarder_->Applied(st.config.generation, i, step);
}

absl::StatusOr<int64_t> RangeStore::ReadChunkForReplica(int64_t generation, int chunk,
                                                        bool full, v1::ReplicaChunk* msg,
                                                        std::string* address) {
  ASSIGN_OR_RETURN(std::shared_ptr<State> cur, Current(generation, "replication"));
  State& st = *cur;
  if (chunk < 0 || chunk >= static_cast<int>(st.chunks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("replication of chunk ", chunk, ": ",
                                                   st.Describe()));
  }
  ChunkSlot& s = *st.chunks[chunk];
  const int64_t n = s.range.size();
  *address = st.config.replica_address;
  msg->mutable_job()->set_job_id(st.config.job_id);
  msg->set_generation(generation);
  msg->mutable_shard_range()->set_begin(st.config.range.lo);
  msg->mutable_shard_range()->set_end(st.config.range.hi);
  msg->set_chunk_elements(st.config.chunk_elements);
  msg->mutable_range()->set_begin(s.range.lo);
  msg->mutable_range()->set_end(s.range.hi);
  *msg->mutable_optimizer() = st.config.optimizer;
  absl::MutexLock lock(&s.mu);
  TakeBackGradient(s, msg);  // a resend of this chunk in full
  msg->set_step(s.applied);
  v1::Tensor* grad = msg->mutable_grad();
  grad->set_dtype(v1::DTYPE_F32);
  if (!full && s.grad_step == s.applied) {
    // The gradient itself goes out: swapped into the message, not copied.
    grad->mutable_data()->swap(s.grad);
    s.grad_lent = true;
    msg->set_lr(s.grad_lr);
    msg->set_grad_scale(s.grad_scale);
    msg->mutable_params()->mutable_data()->clear();  // keeps its capacity
    ShapeState(s, false, msg);
    return s.applied;
  }
  grad->mutable_data()->clear();
  msg->set_lr(0);
  msg->set_grad_scale(0);
  ShapeState(s, true, msg);
  auto fill = [n](v1::Tensor* t, const float* values) {
    t->set_dtype(v1::DTYPE_F32);
    t->mutable_data()->resize(n * sizeof(float));  // keeps its capacity
    std::memcpy(t->mutable_data()->data(), values, n * sizeof(float));
  };
  fill(msg->mutable_params(), st.params.data() + (s.range.lo - st.config.range.lo));
  for (size_t i = 0; i < s.state.size(); ++i) {
    *msg->mutable_state_names(i) = s.state[i].name;
    fill(msg->mutable_state(i), s.state[i].data.data());
  }
  return s.applied;
}

absl::Status RangeStore::WaitReplicated(int64_t generation, int64_t step, absl::Time deadline) {
  ASSIGN_OR_RETURN(std::shared_ptr<State> cur, Current(generation, "push"));
  State& st = *cur;
  const int chunks = static_cast<int>(st.chunks.size());
  absl::MutexLock lock(&st.mu);
  // ReplicaCaughtUp(.., step + 1): every chunk's replica holds `step`.
  while (!st.retired && !st.ReplicaCaughtUp(0, chunks, step + 1)) {
    if (st.applied_cv.WaitWithDeadline(&st.mu, deadline)) break;
  }
  if (st.retired) {
    return absl::AbortedError(absl::StrCat("push acknowledgement: generation ", generation,
                                           " was replaced while waiting for the replica"));
  }
  if (!st.ReplicaCaughtUp(0, chunks, step + 1)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "push acknowledgement: the replica at ", st.config.replica_address,
        " has not acknowledged step ", step, " before the deadline"));
  }
  return absl::OkStatus();
}

void RangeStore::MarkReplicated(int64_t generation, int chunk, int64_t step,
                                v1::ReplicaChunk* sent) {
  absl::StatusOr<std::shared_ptr<State>> cur = Current(generation, "replication");
  if (!cur.ok()) return;  // that generation is over
  State& st = **cur;
  if (chunk < 0 || chunk >= static_cast<int>(st.chunks.size())) return;
  {
    ChunkSlot& s = *st.chunks[chunk];
    absl::MutexLock lock(&s.mu);
    TakeBackGradient(s, sent);
  }
  absl::MutexLock lock(&st.mu);
  if (chunk >= static_cast<int>(st.chunk_replicated.size())) return;
  st.chunk_replicated[chunk] = std::max(st.chunk_replicated[chunk], step);
  st.applied_cv.SignalAll();
}

absl::Status RangeStore::ReadKept(int64_t step, const std::string& name, int64_t lo, int64_t hi,
                                  float* out) const {
  std::shared_ptr<State> cur;
  {
    absl::MutexLock lock(&mu_);
    cur = current_;
  }
  if (cur == nullptr) {
    return absl::FailedPreconditionError(
        "recovery read: this shard server holds no range (restarted?)");
  }
  State& st = *cur;
  const optim::ParamRange r = st.config.range;
  RETURN_IF_ERROR(CheckInRange(r, lo, hi, "recovery read"));
  for (int i = std::max(0, st.FindChunk(lo));
       i < static_cast<int>(st.chunks.size()) && st.chunks[i]->range.lo < hi; ++i) {
    ChunkSlot& s = *st.chunks[i];
    const int64_t a = std::max(lo, s.range.lo), b = std::min(hi, s.range.hi);
    if (b <= a) continue;
    absl::MutexLock lock(&s.mu);
    int which = 0;  // 0: parameters, 1 + k: state buffer k
    if (!name.empty()) {
      auto it = std::find_if(s.state.begin(), s.state.end(),
                             [&](const optim::StateBuffer& x) { return x.name == name; });
      if (it == s.state.end()) {
        return absl::InvalidArgumentError(absl::StrCat("recovery read: the ",
                                                       s.optimizer->name(),
                                                       " optimizer has no state '", name, "'"));
      }
      which = 1 + static_cast<int>(it - s.state.begin());
    }
    const float* from = nullptr;
    if (s.applied == step) {
      from = which == 0 ? st.params.data() + (s.range.lo - r.lo) : s.state[which - 1].data.data();
    } else if (s.keeps && (s.prev_step[0] == step || s.prev_step[1] == step)) {
      from = reinterpret_cast<const float*>(s.kept[s.prev_step[0] == step ? 0 : 1][which].data());
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "recovery read of step ", step, ": chunk [", s.range.lo, ", ", s.range.hi,
          ") is at step ", s.applied,
          !s.keeps ? ""
                   : absl::StrCat(" (kept: ", std::min(s.prev_step[0], s.prev_step[1]), " and ",
                                  std::max(s.prev_step[0], s.prev_step[1]), ")")));
    }
    std::memcpy(out + (a - lo), from + (a - s.range.lo), (b - a) * sizeof(float));
  }
  return absl::OkStatus();
}

int64_t RangeStore::chunk_bytes() const {
  absl::MutexLock lock(&mu_);
  return current_ == nullptr
             ? 0
             : current_->config.chunk_elements * static_cast<int64_t>(sizeof(float));
}

int64_t RangeStore::kept_bytes() const {
  std::shared_ptr<State> cur;
  {
    absl::MutexLock lock(&mu_);
    cur = current_;
  }
  if (cur == nullptr) return 0;
  int64_t bytes = 0;
  for (const std::unique_ptr<ChunkSlot>& s : cur->chunks) {
    absl::MutexLock lock(&s->mu);
    for (const std::vector<std::string>* v : {&s->kept[0], &s->kept[1]}) {
      for (const std::string& b : *v) bytes += static_cast<int64_t>(b.size());
    }
    if (s->keeps) bytes += s->range.size() * static_cast<int64_t>(sizeof(float));  // grad
  }
  return bytes;
}

}  // namespace shardserver
}  // namespace tandem
