#include "common/sync/zero/two_level_allgather.h"

#include "absl/strings/str_cat.h"

namespace tandem {
namespace sync {

std::vector<int> EqualNodesLocalRanks(const CommGroups* groups, int world_size) {
  if (groups == nullptr || groups->intra == nullptr || groups->inter == nullptr ||
      groups->num_nodes < 2 || static_cast<int>(groups->node_of_rank.size()) != world_size) {
    return {};
  }
  std::vector<int> per_node(groups->num_nodes, 0), local_of_rank;
  for (int node : groups->node_of_rank) local_of_rank.push_back(per_node[node]++);
  for (int c : per_node) {
    if (c != per_node[0]) return {};  // unequal nodes: some inter groups miss a node
  }
  return local_of_rank;
}

TwoLevelAllGather::TwoLevelAllGather(const CommGroups* groups, int world_size)
    : local_of_rank_(EqualNodesLocalRanks(groups, world_size)) {
  if (local_of_rank_.empty()) return;
  intra_ = groups->intra.get();
  inter_ = groups->inter.get();
  nodes_ = groups->num_nodes;
  local_size_ = world_size / nodes_;
  node_index_ = groups->node_index;
  local_rank_ = groups->local_rank;
  node_of_rank_ = groups->node_of_rank;
  usable_ = true;
}

absl::Status TwoLevelAllGather::Run(float* out, int64_t count) {
  if (!usable_) return absl::FailedPreconditionError("two-level allgather: nodes are not equal");
  if (count == 0) return absl::OkStatus();
  const int64_t bytes = count * int64_t{sizeof(float)};
  // Inter group k holds the k-th rank of every node, ordered by node: this
  // rank's run of M blocks, in place.
  float* run = out + int64_t{local_rank_} * nodes_ * count;
  absl::Status s = inter_->AllGather(run + int64_t{node_index_} * count, run, bytes);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("two-level allgather across nodes: ", s.message()));
  }
  s = intra_->AllGather(run, out, bytes * nodes_);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("two-level allgather inside the node: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
