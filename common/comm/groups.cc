#include "common/comm/groups.h"

#include <chrono>
#include <exception>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"
#include "gloo/rendezvous/store.h"

namespace tandem {
namespace {

// Stores throw (Gloo's interface has no status). A timeout reads "Timed out"
// (CoordinatorStore) or "Wait timeout" (Gloo's HashStore / FileStore).
absl::Status FromStore(const std::exception& e, absl::string_view op, int rank) {
  const std::string what = e.what();
  const std::string msg = absl::StrCat("comm groups: ", op, " on rank ", rank, " failed: ", what);
  if (what.find("imed out") != std::string::npos || what.find("imeout") != std::string::npos) {
    return absl::DeadlineExceededError(msg);
  }
  return absl::UnavailableError(msg);
}

// Publishes this rank's node id and reads every rank's, in rank order.
absl::StatusOr<std::vector<std::string>> ExchangeNodes(const GroupOptions& o) {
  const CommOptions& b = o.base;
  auto key = [&](int r) { return absl::StrCat(b.prefix, "/node/", r); };
  std::vector<std::string> keys;
  keys.reserve(b.world_size);
  for (int r = 0; r < b.world_size; ++r) keys.push_back(key(r));
  std::vector<std::string> nodes(b.world_size);
  try {
    b.store->set(key(b.rank), std::vector<char>(o.node.begin(), o.node.end()));
    b.store->wait(keys, absl::ToChronoMilliseconds(b.timeout));
    for (int r = 0; r < b.world_size; ++r) {
      std::vector<char> v = b.store->get(keys[r]);
      nodes[r].assign(v.begin(), v.end());
    }
  } catch (const std::exception& e) {
    return FromStore(e, absl::StrCat("exchanging node ids under '", b.prefix, "/node/'"), b.rank);
  }
  return nodes;
}

// "a: ranks 0,1; b: ranks 2,3" for errors.
std::string DescribeNodes(const std::vector<std::string>& names,
                          const std::vector<std::vector<int>>& members) {
  std::vector<std::string> parts;
  for (size_t n = 0; n < names.size(); ++n) {
    parts.push_back(absl::StrCat("'", names[n], "': rank", members[n].size() == 1 ? " " : "s ",
                                 absl::StrJoin(members[n], ",")));
  }
  return absl::StrJoin(parts, "; ");
}

// What `requested` means for a group whose ranks sit on `group_nodes` nodes.
std::string Resolve(const std::string& requested, int group_nodes) {
  if (requested != "auto") return requested;
  return group_nodes == 1 ? "shm" : "gloo";
}

absl::StatusOr<std::unique_ptr<Communicator>> Build(const CommOptions& base,
                                                    const std::string& transport, int rank,
                                                    int world_size, const std::string& prefix,
                                                    absl::string_view what) {
  CommOptions c = base;
  c.transport = transport;
  c.rank = rank;
  c.world_size = world_size;
  c.prefix = prefix;
  absl::StatusOr<std::unique_ptr<Communicator>> comm = CreateCommunicator(c);
  if (!comm.ok()) {
    return Annotate(comm.status(), absl::StrCat("comm groups: ", what, " (", transport, ", rank ",
                                                rank, " of ", world_size, ")"));
  }
  return comm;
}

}  // namespace

absl::StatusOr<CommGroups> CreateCommGroups(const GroupOptions& options) {
  const CommOptions& b = options.base;
  if (b.world_size < 1 || b.rank < 0 || b.rank >= b.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("comm groups: rank ", b.rank,
                                                   " is not in a world of ", b.world_size,
                                                   " (need 0 <= rank < world_size)"));
  }
  if (b.store == nullptr) {
    return absl::InvalidArgumentError(
        "comm groups: base.store is required (the coordinator store of this generation)");
  }
  if (options.node.empty()) {
    return absl::InvalidArgumentError(
        "comm groups: the node id is empty: pass the host name or --node_id");
  }
  // Every rank has the same options, so a bad transport fails everywhere at
  // once, before anyone waits on the store.
  if (options.transport != "auto") RETURN_IF_ERROR(CheckTransport(options.transport));

  ASSIGN_OR_RETURN(std::vector<std::string> node_ids, ExchangeNodes(options));

  CommGroups g;
  // Nodes are numbered in the order of their lowest rank.
  std::map<std::string, int> index_of;
  std::vector<std::vector<int>> members;  // world ranks of each node, ascending
  g.node_of_rank.resize(b.world_size);
  for (int r = 0; r < b.world_size; ++r) {
    auto [it, inserted] = index_of.emplace(node_ids[r], static_cast<int>(g.nodes.size()));
    if (inserted) {
      g.nodes.push_back(node_ids[r]);
      members.emplace_back();
    }
    g.node_of_rank[r] = it->second;
    members[it->second].push_back(r);
  }
  g.num_nodes = static_cast<int>(g.nodes.size());
  g.node_index = g.node_of_rank[b.rank];
  const std::vector<int>& mine = members[g.node_index];
  g.local_size = static_cast<int>(mine.size());
  for (int i = 0; i < g.local_size; ++i) {
    if (mine[i] == b.rank) g.local_rank = i;
  }

  if (options.transport == "shm" && g.num_nodes > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "comm groups: transport 'shm' needs every rank on one node, but the world of ",
        b.world_size, " spans ", g.num_nodes, " nodes (", DescribeNodes(g.nodes, members),
        "): use transport auto (shm inside a node, gloo across) or gloo"));
  }

  g.world_transport = Resolve(options.transport, g.num_nodes);
  ASSIGN_OR_RETURN(g.world, Build(b, g.world_transport, b.rank, b.world_size,
                                  absl::StrCat(b.prefix, "/world"), "world"));
  if (!options.node_groups) return g;

  // Every rank builds world, then intra, then inter: a group's rendezvous
  // only needs its members to have finished the groups before it, so the
  // fixed order cannot deadlock.
  g.intra_transport = Resolve(options.transport, 1);
  ASSIGN_OR_RETURN(g.intra, Build(b, g.intra_transport, g.local_rank, g.local_size,
                                  absl::StrCat(b.prefix, "/intra", g.node_index),
                                  absl::StrCat("intra group of node '", options.node, "'")));

  // Inter group k: the k-th rank of every node that has more than k ranks,
  // in node order. With unequal nodes the groups of high k are smaller.
  int inter_rank = 0, inter_size = 0;
  for (int n = 0; n < g.num_nodes; ++n) {
    if (static_cast<int>(members[n].size()) <= g.local_rank) continue;
    if (n == g.node_index) inter_rank = inter_size;
    ++inter_size;
  }
  g.inter_transport = Resolve(options.transport, inter_size);
  ASSIGN_OR_RETURN(g.inter, Build(b, g.inter_transport, inter_rank, inter_size,
                                  absl::StrCat(b.prefix, "/inter", g.local_rank),
                                  absl::StrCat("inter group of local rank ", g.local_rank)));
  return g;
}

}  // namespace tandem
