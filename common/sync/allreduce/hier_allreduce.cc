#include "common/sync/allreduce/hier_allreduce.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/trace/trace.h"

namespace tandem {
namespace sync {

std::string HierarchicalUnusableReason(const CommGroups& groups) {
  if (groups.world == nullptr) return "there is no world communicator";
  const int world = groups.world->world_size();
  if (static_cast<int>(groups.node_of_rank.size()) != world) {
    return absl::StrCat("the node of every rank is not known (node_of_rank has ",
                        groups.node_of_rank.size(), " entries for a world of ", world, ")");
  }
  if (groups.num_nodes <= 1) {
    return "all ranks are on one node (flat allreduce is already intra-node)";
  }
  std::map<int, int> ranks_on;  // node index -> ranks
  for (int node : groups.node_of_rank) ++ranks_on[node];
  int smallest = world, largest = 0;
  for (const auto& kv : ranks_on) {
    smallest = std::min(smallest, kv.second);
    largest = std::max(largest, kv.second);
  }
  if (smallest != largest) {
    std::vector<std::string> sizes;
    for (const auto& kv : ranks_on) {
      const std::string name = kv.first < static_cast<int>(groups.nodes.size())
                                   ? groups.nodes[kv.first]
                                   : absl::StrCat(kv.first);
      sizes.push_back(absl::StrCat("'", name, "': ", kv.second));
    }
    return absl::StrCat(
        "nodes have different numbers of ranks (", absl::StrJoin(sizes, ", "),
        "): a node's shares of a bucket would not line up with the other nodes' shares for the "
        "inter-node allreduce, and the larger nodes' extra local ranks have no peer on the "
        "smaller ones");
  }
  if (largest == 1) return "every node has one rank (flat allreduce is already inter-node only)";
  if (groups.intra == nullptr || groups.inter == nullptr) {
    return "the intra-node and inter-node groups were not built (CommGroups node_groups = false)";
  }
  if (groups.intra->world_size() != largest || groups.inter->world_size() != groups.num_nodes) {
    return absl::StrCat("the groups do not match the node layout (intra has ",
                        groups.intra->world_size(), " ranks for nodes of ", largest,
                        ", inter has ", groups.inter->world_size(), " for ", groups.num_nodes,
                        " nodes)");
  }
  return "";
}

absl::StatusOr<std::unique_ptr<HierAllreduce>> HierAllreduce::Create(
    const HierAllreduceOptions& options) {
  if (options.groups == nullptr) {
    return absl::InvalidArgumentError("hierarchical allreduce: CommGroups are required");
  }
  if (options.max_count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical allreduce: negative max_count ", options.max_count));
  }
  const std::string reason = HierarchicalUnusableReason(*options.groups);
  if (!reason.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical allreduce cannot run on this layout: ", reason));
  }
  return std::unique_ptr<HierAllreduce>(new HierAllreduce(*options.groups, options.max_count));
}

HierAllreduce::HierAllreduce(const CommGroups& groups, int64_t max_count)
    : inter_(groups.inter.get()),
      local_size_(groups.intra->world_size()),
      local_rank_(groups.intra->rank()),
      node_index_(groups.node_index),
      max_share_(ShareCount(max_count)),
      shares_(groups.intra.get(), max_share_) {}

absl::Status HierAllreduce::Failed(const absl::Status& s, const char* phase,
                                   int64_t count) const {
  return absl::Status(s.code(), absl::StrCat(phase, " of ", count, " floats (node ", node_index_,
                                             ", local rank ", local_rank_, " of ", local_size_,
                                             "): ", s.message()));
}

absl::Status HierAllreduce::Run(float* data, int64_t count) {
  const int64_t share = ShareCount(count);
  if (count < 0 || share > max_share_) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical allreduce: bucket of ", count,
                     " floats is outside the staging sized in Create for at most ",
                     max_share_ * local_size_, " (pass the largest bucket as max_count)"));
  }
  if (count == 0) return absl::OkStatus();
  const int64_t bytes = int64_t{sizeof(float)} * count;
  {
    trace::Span t("reduce-scatter", "comm", bytes);
    if (absl::Status s = shares_.ReduceBucket(data, count); !s.ok()) {
      return Failed(s, "intra-node reduce-scatter", count);
    }
  }
  {
    trace::Span t("inter-node", "comm", int64_t{sizeof(float)} * share);
    if (absl::Status s = inter_->AllReduce(shares_.share(), share, ReduceOp::kSum); !s.ok()) {
      return Failed(s, "inter-node allreduce", share);
    }
  }
  {
    trace::Span t("allgather", "comm", bytes);
    if (absl::Status s = shares_.GatherBucket(data, count); !s.ok()) {
      return Failed(s, "intra-node allgather", count);
    }
  }
  return absl::OkStatus();
}

}  // namespace sync
}  // namespace tandem
