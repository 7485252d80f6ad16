#include "common/sync/allreduce/node_shares.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace sync {

NodeShares::NodeShares(Communicator* intra, int64_t max_block)
    : intra_(intra),
      local_size_(intra->world_size()),
      local_rank_(intra->rank()),
      padded_(static_cast<size_t>(std::max<int64_t>(0, max_block) * local_size_)),
      share_(static_cast<size_t>(std::max<int64_t>(0, max_block))) {}

absl::Status NodeShares::CheckBlock(int64_t block, size_t pieces) const {
  if (block < 0 || block > static_cast<int64_t>(share_.size()) ||
      pieces != static_cast<size_t>(local_size_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node shares: ", pieces, " piece(s) of up to ", block, " floats for ", local_size_,
        " local ranks, staging sized for ", share_.size(), " (pass the largest block)"));
  }
  return absl::OkStatus();
}

absl::Status NodeShares::CheckBucket(int64_t n) const {
  if (n >= 0 && ShareCount(n) <= static_cast<int64_t>(share_.size())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "node shares: a bucket of ", n, " floats is outside the staging sized for at most ",
      share_.size() * local_size_, " (pass ceil(largest bucket / local ranks) as max_block)"));
}

absl::Status NodeShares::ReduceBucket(const float* data, int64_t n) {
  const int64_t share = ShareCount(n);
  if (absl::Status s = CheckBucket(n); !s.ok()) return s;
  if (n % local_size_ == 0) return intra_->ReduceScatter(data, share_.data(), share);
  std::memcpy(padded_.data(), data, sizeof(float) * n);
  // The pad only reaches pad positions of the result (the sum is
  // elementwise), which are dropped; zeroing it keeps stale sums out of
  // the staging anyway.
  std::fill(padded_.begin() + n, padded_.begin() + share * local_size_, 0.f);
  return intra_->ReduceScatter(padded_.data(), share_.data(), share);
}

absl::Status NodeShares::GatherBucket(float* data, int64_t n) {
  const int64_t share = ShareCount(n);
  if (absl::Status s = CheckBucket(n); !s.ok()) return s;
  const int64_t bytes = share * int64_t{sizeof(float)};
  if (n % local_size_ == 0) return intra_->AllGather(share_.data(), data, bytes);
  if (absl::Status s = intra_->AllGather(share_.data(), padded_.data(), bytes); !s.ok()) return s;
  std::memcpy(data, padded_.data(), sizeof(float) * n);
  return absl::OkStatus();
}

absl::Status NodeShares::ReducePieces(const float* data, absl::Span<const Piece> pieces,
                                      int64_t block) {
  if (absl::Status s = CheckBlock(block, pieces.size()); !s.ok()) return s;
  for (int k = 0; k < local_size_; ++k) {
    float* to = padded_.data() + k * block;
    const Piece& p = pieces[k];
    std::memcpy(to, data + p.lo, p.n * sizeof(float));
    std::fill(to + p.n, to + block, 0.f);
  }
  return intra_->ReduceScatter(padded_.data(), share_.data(), block);
}

absl::Status NodeShares::GatherPieces(float* data, absl::Span<const Piece> pieces,
                                      int64_t block) {
  if (absl::Status s = CheckBlock(block, pieces.size()); !s.ok()) return s;
  // Past this rank's piece the share is padding (never copied out below).
  std::fill(share_.begin() + pieces[local_rank_].n, share_.begin() + block, 0.f);
  absl::Status s = intra_->AllGather(share_.data(), padded_.data(), block * int64_t{sizeof(float)});
  if (!s.ok()) return s;
  for (int k = 0; k < local_size_; ++k) {
    if (k == local_rank_) continue;  // the caller's own piece is its share already
    std::memcpy(data + pieces[k].lo, padded_.data() + k * block, pieces[k].n * sizeof(float));
  }
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
