#include "services/shardserver/replica_store.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
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
  names_.assign(c.state_names().begin(), c.state_names().end());
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

absl::Status ReplicaStore::Accept(const v1::ReplicaChunk& c) {
  const int64_t lo = c.range().begin(), hi = c.range().end();
  if (c.generation() < 1 || c.step() < 0 || c.chunk_elements() < 1 ||
      c.shard_range().begin() < 0 || c.shard_range().end() < c.shard_range().begin() ||
      lo < c.shard_range().begin() || hi > c.shard_range().end() || lo >= hi ||
      c.state_names_size() != c.state_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Replicate: bad chunk [", lo, ", ", hi, ") of range [", c.shard_range().begin(), ", ",
        c.shard_range().end(), "), generation ", c.generation(), ", step ", c.step(), ", ",
        c.state_names_size(), " state names for ", c.state_size(), " buffers"));
  }
  RETURN_IF_ERROR(CheckTensor(c.params(), hi - lo, "params"));
  for (int i = 0; i < c.state_size(); ++i) {
    RETURN_IF_ERROR(CheckTensor(c.state(i), hi - lo, "state"));
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
                           std::equal(names_.begin(), names_.end(), c.state_names().begin(),
                                      c.state_names().end());
  if (!same_layout) Reset(c);
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), lo,
                             [](int64_t v, const Chunk& k) { return v < k.lo; });
  if (it == chunks_.begin() || (it - 1)->lo != lo || (it - 1)->hi != hi) {
    return absl::InvalidArgumentError(absl::StrCat("Replicate: [", lo, ", ", hi,
                                                   ") is not a chunk of [", range_.lo, ", ",
                                                   range_.hi, ") cut at ", chunk_elements_));
  }
  Chunk& k = *(it - 1);
  if (k.v[0].step == c.step() || k.v[1].step == c.step()) return absl::OkStatus();  // a repeat
  // Overwrite the older version (never allocated again once both exist).
  Version& v = k.v[0].step <= k.v[1].step ? k.v[0] : k.v[1];
  const int64_t n = hi - lo;
  const size_t want = static_cast<size_t>((1 + names_.size()) * n);
  if (v.values.size() != want) {
    bytes_ += static_cast<int64_t>(want - v.values.size()) * static_cast<int64_t>(sizeof(float));
    v.values.resize(want);
  }
  std::memcpy(v.values.data(), c.params().data().data(), n * sizeof(float));
  for (int i = 0; i < c.state_size(); ++i) {
    std::memcpy(v.values.data() + (1 + i) * n, c.state(i).data().data(), n * sizeof(float));
  }
  v.step = c.step();
  return absl::OkStatus();
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
  int which = 0;
  if (!name.empty()) {
    auto n = std::find(names_.begin(), names_.end(), name);
    if (n == names_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("replica read: the primary sent no optimizer state '", name, "'"));
    }
    which = 1 + static_cast<int>(n - names_.begin());
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
    std::memcpy(out + (a - lo), v->values.data() + which * (k.hi - k.lo) + (a - k.lo),
                (b - a) * sizeof(float));
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
