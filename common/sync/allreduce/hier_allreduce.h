// HierAllreduce: the node-aware allreduce of one gradient bucket, the
// per-bucket operation of `--sync allreduce --sync_opt hier=1`. For a bucket
// of n floats on a node of L ranks:
//
//   1. intra ReduceScatter: the node's sum, local rank k keeps share k
//      (ceil(n / L) floats; n is padded with zeros to a multiple of L in a
//      staging buffer when it is not one already),
//   2. inter AllReduce of that share with the same local rank of every
//      other node (CommGroups::inter): now share k is the world's sum,
//   3. intra AllGather of the shares back into the bucket.
//
// Only ceil(n / L) floats per rank cross nodes instead of the flat ring's n,
// so a node's cross-node traffic is 1/L of flat's.
//
//   HierAllreduceOptions o;  o.groups = &groups;  o.max_count = largest_bucket;
//   if (HierarchicalUnusableReason(groups).empty()) {
//     ASSIGN_OR_RETURN(std::unique_ptr<HierAllreduce> h, HierAllreduce::Create(o));
//     RETURN_IF_ERROR(h->Run(grads + lo, hi - lo));  // every rank, same counts
//   }
//
// Exactness: the result is the sum over every world rank, on every rank, but
// summed in another order than a flat ring (node sums first), so it equals
// flat allreduce only within float rounding (exactly for integer-valued data).
// The shares must line up across nodes, which needs every node to have the
// same number of ranks: with nodes of 2 and 1 ranks, the lone rank's share
// is the whole bucket while the pair's are halves, and inter group 1 has no
// member on the small node at all. HierarchicalUnusableReason says why a
// layout cannot use this scheme (then the caller uses flat allreduce).
//
// Steps 1 and 3 are NodeShares' reduce-to-share and gather-from-share
// (node_shares.h), which compressed (hier=1) and hybrid use too.
// Memory: host memory only (the staging buffers are host vectors), so Gloo
// and shm communicators; the staging is allocated once in Create, sized for
// max_count, and Run allocates nothing.
// Thread-safety: not thread-safe; one thread (the bucket engine's
// communication thread) calls Run. Ownership: the groups and their
// communicators are borrowed and must outlive this object.
// Failure: Create returns InvalidArgument for an unusable layout (the
// reason), missing groups or a negative max_count. Run returns
// InvalidArgument for a count above max_count and otherwise the failing
// collective's status (DEADLINE_EXCEEDED, UNAVAILABLE, ...) prefixed with
// the phase ("intra-node reduce-scatter", "inter-node allreduce",
// "intra-node allgather"), the node and the local rank; the data is then
// unspecified and the communicators unusable (the generation is over).
#ifndef TANDEM_COMMON_SYNC_ALLREDUCE_HIER_ALLREDUCE_H_
#define TANDEM_COMMON_SYNC_ALLREDUCE_HIER_ALLREDUCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/groups.h"
#include "common/sync/allreduce/node_shares.h"

namespace tandem {
namespace sync {

// Why the hierarchical scheme cannot run (exactly) on `groups`, or "" when
// it can: every world rank's node is known (node_of_rank), there are at
// least two nodes, every node has the same number L >= 2 of ranks, and the
// intra / inter communicators exist with L and num_nodes ranks. Depends only
// on what every rank of the world sees identically, so every rank decides
// the same.
std::string HierarchicalUnusableReason(const CommGroups& groups);

struct HierAllreduceOptions {
  const CommGroups* groups = nullptr;  // borrowed; intra and inter are used
  int64_t max_count = 0;               // the largest bucket Run will get, floats
};

class HierAllreduce {
 public:
  static absl::StatusOr<std::unique_ptr<HierAllreduce>> Create(const HierAllreduceOptions& options);
  HierAllreduce(const HierAllreduce&) = delete;
  HierAllreduce& operator=(const HierAllreduce&) = delete;

  // In place: data[0, count) becomes the sum over every world rank. A
  // collective over both groups: every rank calls it with the same count.
  absl::Status Run(float* data, int64_t count);

  // Floats of a `count` bucket this rank hands to the inter-node allreduce:
  // ceil(count / L).
  // Bytes of the staging buffers (allocated once at Create).
  int64_t staging_bytes() const { return shares_.staging_bytes(); }
  int64_t ShareCount(int64_t count) const { return (count + local_size_ - 1) / local_size_; }
  int local_size() const { return local_size_; }

 private:
  HierAllreduce(const CommGroups& groups, int64_t max_count);
  absl::Status Failed(const absl::Status& s, const char* phase, int64_t count) const;

  Communicator* const inter_;
  const int local_size_;
  const int local_rank_;
  const int node_index_;
  const int64_t max_share_;  // ShareCount(max_count)
  // The intra-node phases and their staging (L x max_share_ + max_share_).
  NodeShares shares_;
};

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_ALLREDUCE_HIER_ALLREDUCE_H_
