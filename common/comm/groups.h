// Communicator groups for one generation: the world, the ranks on this node
// (intra) and one rank per node with this rank's local index (inter). The
// hierarchical and hybrid strategies reduce inside a node over `intra` and
// across nodes over `inter`. Ranks learn each other's node through the
// coordinator store (key <prefix>/node/<rank>), so nothing assumes the
// coordinator grouped ranks in any particular order. Each group is built
// with its own prefix (<prefix>/world, <prefix>/intra<node_index>,
// <prefix>/inter<local_rank>).
//
//   GroupOptions g;  g.base.rank = r;  g.base.world_size = n;  g.base.store = s;
//   g.base.prefix = "job/gen3/grad";  g.node = "host-a";  g.transport = "auto";
//   ASSIGN_OR_RETURN(CommGroups groups, CreateCommGroups(g));
//   groups.world->AllReduce(...);
//
// Numbering: nodes are numbered 0..num_nodes-1 in the order of their lowest
// world rank; intra ranks are ordered by world rank (intra rank = local_rank);
// inter group k holds the k-th rank of every node that has more than k ranks,
// ordered by node. Nodes may differ in size: then the inter groups differ in
// size too (nodes a,b,a,b,b: inter0 = {0,1}, inter1 = {2,3}, inter2 = {4}).
// A rank alone in its group gets a communicator of world_size 1.
//
// Transport "auto": per group, shm when every rank of the group is on one
// node, gloo otherwise (so intra: shm; inter: gloo, or shm when the group
// is a single rank). A forced "shm" on a world that spans nodes is
// INVALID_ARGUMENT naming the nodes and their ranks (a configuration error,
// not a membership change). "gloo" and "nccl" are used as given for every
// group.
//
// Thread-safety: collective — every rank of the world calls CreateCommGroups
// once per generation with the same options but rank, node (and hostname).
// Groups are built in the order world, intra, inter on every rank, so the
// rendezvous cannot deadlock. The groups own their communicators; the store
// is borrowed for the call only. Errors: INVALID_ARGUMENT for a bad rank,
// missing store, empty node id or unusable transport (before touching the
// store); the store's errors as DEADLINE_EXCEEDED / UNAVAILABLE; a
// transport's Create error prefixed with the group it was building.
#ifndef TANDEM_COMMON_COMM_GROUPS_H_
#define TANDEM_COMMON_COMM_GROUPS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/comm/communicator.h"
#include "common/comm/factory.h"

namespace tandem {

struct GroupOptions {
  // rank, world_size, store, prefix, hostname, timeout, device settings;
  // base.transport is ignored (see `transport`).
  CommOptions base;
  std::string node;                 // this rank's node id (host name or --node_id)
  std::string transport = "auto";   // "auto", "gloo", "shm" or "nccl"
  bool node_groups = false;         // also build intra and inter
};

struct CommGroups {
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> intra;  // nullptr unless node_groups
  std::unique_ptr<Communicator> inter;  // nullptr unless node_groups
  int node_index = 0;   // this rank's node, 0..num_nodes-1 (order of first rank)
  int num_nodes = 1;
  int local_rank = 0;   // index among the ranks of this node
  int local_size = 1;
  std::vector<int> node_of_rank;   // node index of every world rank
  std::vector<std::string> nodes;  // node id of every node index
  std::string world_transport;     // what "auto" resolved to for world
  std::string intra_transport;     // ... for intra, and for inter
  std::string inter_transport;     // ("" unless node_groups)
};

absl::StatusOr<CommGroups> CreateCommGroups(const GroupOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_GROUPS_H_
