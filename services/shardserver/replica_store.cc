#include "services/shardserver/replica_store.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/shard/optimizer_config.h"
#include "common/status/status_macros.h"
#include "common/shard/shard_layout.h"

namespace tandem {
namespace shardserver {
namespace {

absl::Status CheckTensor(const v1::Tensor& t, int64_t n, const char* what) {
  if (t.dtype() != v1::DTYPE_F32 ||
      static_cast<int64_t>(t.data().size()) != n * static_cast<int64_t>(sizeof(float))) {
    return absl::InvalidArgumentError(absl::StrCat("Replicate: ", what, " holds ",
                                                   t.data().size(), " bytes of ",
                                                   v1::DType_Name(t.dtype()), ", expected ", n,
                                                   " DTYPE_F32 values"));
  }
  return absl::OkStatus();
}

}  // namespace

void ReplicaStore::Reset(const v1::ReplicaChunk& c) {
  generation_ = c.generation();
  range_ = {c.shard_range().begin(), c.shard_range().end()};
  chunk_elements_ = c.chunk_elements();
  optimizer_ = c.optimizer();
  chunks_.clear();
  for (const shard::Chunk& ch :
       shard::ShardLayout::CutRange(range_.lo, range_.hi, chunk_elements_, 0)) {
    Chunk k;
    k.lo = ch.lo;
    k.hi = ch.hi;
    chunks_.push_back(std::move(k));
  }
  bytes_ = 0;
}

absl::Status ReplicaStore::Prepare(const Chunk& k, Version& v) {
  if (v.optimizer != nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(v.optimizer, shard::BuildOptimizer(optimizer_, {k.lo, k.hi}));
  v.state = v.optimizer->state();
  v.params.assign(k.hi - k.lo, 0.f);
  bytes_ += static_cast<int64_t>((1 + v.state.size()) * v.params.size() * sizeof(float));
  return absl::OkStatus();
}

absl::StatusOr<ReplicaStore::Accepted> ReplicaStore::Accept(const v1::ReplicaChunk& c) {
  const int64_t lo = c.range().begin(), hi = c.range().end();
  const bool gradient = !c.grad().data().empty();
  if (c.generation() < 1 || c.step() < 0 || c.chunk_elements() < 1 ||
      c.shard_range().begin() < 0 || c.shard_range().end() < c.shard_range().begin() ||
      lo < c.shard_range().begin() || hi > c.shard_range().end() || lo >= hi ||
      (!gradient && c.state_names_size() != c.state_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Replicate: bad chunk [", lo, ", ", hi, ") of range [", c.shard_range().begin(), ", ",
        c.shard_range().end(), "), generation ", c.generation(), ", step ", c.step(), ", ",
        c.state_names_size(), " state names for ", c.state_size(), " buffers"));
  }
  if (gradient) {
    RETURN_IF_ERROR(CheckTensor(c.grad(), hi - lo, "grad"));
  } else {
    RETURN_IF_ERROR(CheckTensor(c.params(), hi - lo, "params"));
    for (int i = 0; i < c.state_size(); ++i) {
      RETURN_IF_ERROR(CheckTensor(c.state(i), hi - lo, "state"));
    }
  }
  absl::MutexLock lock(&mu_);
  if (c.generation() < generation_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Replicate for generation ", c.generation(), " but this replica holds generation ",
        generation_, ": a stale primary"));
  }
  const bool same_layout = c.generation() == generation_ && range_.lo == c.shard_range().begin() &&
                           range_.hi == c.shard_range().end() &&
                           chunk_elements_ == c.chunk_elements() &&
                           shard::SameOptimizer(optimizer_, c.optimizer());
  if (!same_layout) {
    // The optimizer is checked before anything held is dropped.
    absl::StatusOr<std::unique_ptr<optim::Optimizer>> probe =
        shard::BuildOptimizer(c.optimizer(), {0, 1});
    if (!probe.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Replicate: the primary's optimizer: ", probe.status().message()));
    }
    Reset(c);
    names_.clear();
    for (const optim::StateBuffer& b : (*probe)->state()) names_.push_back(b.name);
  }
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), lo,
                             [](int64_t v, const Chunk& k) { return v < k.lo; });
  if (it == chunks_.begin() || (it - 1)->lo != lo || (it - 1)->hi != hi) {
    return absl::InvalidArgumentError(absl::StrCat("Replicate: [", lo, ", ", hi,
                                                   ") is not a chunk of [", range_.lo, ", ",
                                                   range_.hi, ") cut at ", chunk_elements_));
  }
  Chunk& k = *(it - 1);
  if (k.v[0].step == c.step() || k.v[1].step == c.step()) return Accepted::kHeld;  // a repeat
  return gradient ? AcceptGradient(c, k) : AcceptState(c, k);
}

absl::StatusOr<ReplicaStore::Accepted> ReplicaStore::AcceptState(const v1::ReplicaChunk& c,
                                                                 Chunk& k) {
  if (!std::equal(names_.begin(), names_.end(), c.state_names().begin(),
                  c.state_names().end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Replicate: state buffers [", absl::StrJoin(c.state_names(), ", "), "] for a ",
        optimizer_.name(), " optimizer, which holds [", absl::StrJoin(names_, ", "), "]"));
  }
  // Overwrite the older version.
  Version& v = k.v[0].step <= k.v[1].step ? k.v[0] : k.v[1];
  RETURN_IF_ERROR(Prepare(k, v));
  const size_t bytes = v.params.size() * sizeof(float);
  std::memcpy(v.params.data(), c.params().data().data(), bytes);
  for (int i = 0; i < c.state_size(); ++i) {
    std::memcpy(v.state[i].data.data(), c.state(i).data().data(), bytes);
  }
  v.step = c.step();
  return Accepted::kHeld;
}

absl::StatusOr<ReplicaStore::Accepted> ReplicaStore::AcceptGradient(const v1::ReplicaChunk& c,
                                                                    Chunk& k) {
  const int base = k.v[0].step == c.step() - 1 ? 0 : k.v[1].step == c.step() - 1 ? 1 : -1;
  if (base < 0) return Accepted::kNeedsState;
  const Version& from = k.v[base];
  Version& to = k.v[1 - base];
  RETURN_IF_ERROR(Prepare(k, to));
  const int64_t n = k.hi - k.lo;
  std::memcpy(to.params.data(), from.params.data(), n * sizeof(float));
  for (size_t i = 0; i < to.state.size(); ++i) {
    std::memcpy(to.state[i].data.data(), from.state[i].data.data(), n * sizeof(float));
  }
  optim::StepContext ctx;
  ctx.step = c.step();
  ctx.lr = c.lr();
  ctx.grad_scale = c.grad_scale();
  const absl::Status s = to.optimizer->Step(
      to.params.data(), reinterpret_cast<const float*>(c.grad().data().data()), n, ctx);
  if (!s.ok()) {
    to.step = -1;
    return absl::InvalidArgumentError(
        absl::StrCat("Replicate: the gradient of step ", c.step(), " for [", k.lo, ", ", k.hi,
                     "): ", s.message()));
  }
  to.step = c.step();
  return Accepted::kHeld;
}

absl::Status ReplicaStore::Read(int64_t step, const std::string& name, int64_t lo, int64_t hi,
                                float* out) const {
  absl::MutexLock lock(&mu_);
  if (generation_ == 0 || lo < range_.lo || hi > range_.hi || lo > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replica read of [", lo, ", ", hi, "): this server holds ",
        generation_ == 0 ? std::string("no replica")
                         : absl::StrCat("a replica of [", range_.lo, ", ", range_.hi, ")")));
  }
  int which = -1;  // -1: the parameters, else state buffer `which`
  if (!name.empty()) {
    auto n = std::find(names_.begin(), names_.end(), name);
    if (n == names_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replica read: the primary's ", optimizer_.name(), " optimizer has no state '", name,
          "'"));
    }
    which = static_cast<int>(n - names_.begin());
  }
  for (const Chunk& k : chunks_) {
    const int64_t a = std::max(lo, k.lo), b = std::min(hi, k.hi);
    if (b <= a) continue;
    const Version* v = k.v[0].step == step ? &k.v[0] : k.v[1].step == step ? &k.v[1] : nullptr;
    if (v == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "replica of chunk [", k.lo, ", ", k.hi, ") holds steps ", k.v[0].step, " and ",
          k.v[1].step, ", not ", step));
    }
    const float* from = which < 0 ? v->params.data() : v->state[which].data.data();
    std::memcpy(out + (a - lo), from + (a - k.lo), (b - a) * sizeof(float));
  }
  return absl::OkStatus();
}

ReplicaInfo ReplicaStore::info() const {
  absl::MutexLock lock(&mu_);
  ReplicaInfo i;
  i.generation = generation_;
  i.range = range_;
  i.bytes = bytes_;
  if (generation_ == 0) return i;
  i.step = INT64_MAX;
  for (const Chunk& k : chunks_) i.step = std::min(i.step, std::max(k.v[0].step, k.v[1].step));
  if (chunks_.empty()) i.step = -1;
  return i;
}

}  // namespace shardserver
}  // namespace tandem
