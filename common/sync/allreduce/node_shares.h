// NodeShares: the two intra-node phases every hierarchical scheme here
// runs around its cross-node step. A node of L ranks cuts a range of floats
// into L pieces, piece k belonging to local rank k:
//
//   reduce-to-share:   intra ReduceScatter; share() = the node's sum of
//                      this rank's piece (each piece padded to `block`)
//   ... the caller's cross-node step on share() (an inter allreduce, a
//       compressed exchange, a push to and pull from the shard servers) ...
//   gather-from-share: intra AllGather of every rank's share() back into
//                      the pieces.
//
// Two layouts of the pieces:
//   - a bucket [0, n) cut into L equal shares of ceil(n / L) (hier=1 of
//     allreduce and compressed): ReduceBucket / GatherBucket. A bucket that
//     splits evenly is reduce-scattered from and gathered into the caller's
//     buffer directly; otherwise through a zero-padded staging copy;
//   - explicit pieces of at most `block` floats each, possibly empty (the
//     shard chunks of a hybrid chunk group): ReducePieces / GatherPieces.
//
//   NodeShares shares(groups.intra.get(), /*max_block=*/ceil(max_bucket / L));
//   RETURN_IF_ERROR(shares.ReduceBucket(grads + lo, n));
//   RETURN_IF_ERROR(inter->AllReduce(shares.share(), shares.ShareCount(n), kSum));
//   RETURN_IF_ERROR(shares.GatherBucket(grads + lo, n));
//
// Memory: host memory (Gloo and shm communicators); the staging (L x
// max_block + max_block floats) is allocated once in the constructor and the
// phases allocate nothing. Thread-safety: not thread-safe; one thread at a
// time runs the phases (they are collectives on `intra`). Ownership: `intra`
// is borrowed and must outlive this object.
// Failure: a layout larger than the staging is INVALID_ARGUMENT (nothing
// sent); otherwise the collective's status as it is (callers add which
// bucket or group and which rank); the data is then unspecified.
#ifndef TANDEM_COMMON_SYNC_ALLREDUCE_NODE_SHARES_H_
#define TANDEM_COMMON_SYNC_ALLREDUCE_NODE_SHARES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/comm/communicator.h"

namespace tandem {
namespace sync {

class NodeShares {
 public:
  // Local rank k's piece: floats [lo, lo + n) of the caller's buffer; n may
  // be 0 (a rank with no piece still takes part in the collectives).
  struct Piece {
    int64_t lo = 0;
    int64_t n = 0;
  };

  // Staging for pieces of at most `max_block` floats over `intra`.
  NodeShares(Communicator* intra, int64_t max_block);
  NodeShares(const NodeShares&) = delete;
  NodeShares& operator=(const NodeShares&) = delete;

  // Equal shares of a bucket of n floats: ceil(n / L).
  int64_t ShareCount(int64_t n) const { return (n + local_size_ - 1) / local_size_; }
  // share() = the node's sum of this rank's share of data[0, n).
  absl::Status ReduceBucket(const float* data, int64_t n);
  // data[0, n) = every local rank's share().
  absl::Status GatherBucket(float* data, int64_t n);

  // pieces.size() == L, piece k at most `block` floats. share()[0, block) =
  // the node's sum of this rank's piece (zero past its n).
  absl::Status ReducePieces(const float* data, absl::Span<const Piece> pieces, int64_t block);
  // The caller's share()[0, its piece's n) is its piece (it fills it;
  // the rest is zeroed here). Every other local rank's piece of `data` =
  // that rank's share; this rank's own piece of `data` is left as it is.
  absl::Status GatherPieces(float* data, absl::Span<const Piece> pieces, int64_t block);

  // This rank's share: max_block floats, valid as the last phase left it.
  float* share() { return share_.data(); }
  int local_size() const { return local_size_; }
  int local_rank() const { return local_rank_; }
  int64_t staging_bytes() const {
    return static_cast<int64_t>((padded_.size() + share_.size()) * sizeof(float));
  }

 private:
  absl::Status CheckBucket(int64_t n) const;
  absl::Status CheckBlock(int64_t block, size_t pieces) const;

  Communicator* const intra_;
  const int local_size_;
  const int local_rank_;
  std::vector<float> padded_;  // L x max_block: the pieces, each padded to the block
  std::vector<float> share_;   // max_block: this rank's share
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ALLREDUCE_NODE_SHARES_H_
