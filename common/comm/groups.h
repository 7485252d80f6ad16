// Communicator groups for one generation: the world, the ranks on this node
// (intra) and one rank per node with this rank's local index (inter). The
// hierarchical and hybrid strategies reduce inside a node over `intra` and
// across nodes over `inter`. Ranks learn each other's node through the
// coordinator store (key <prefix>/node/<rank>), so nothing assumes the
// coordinator grouped ranks in any particular order. Each group is built
// with its own prefix (<prefix>/world, <prefix>/intra<node>,
// <prefix>/inter<local_rank>).
//
//   GroupOptions g;  g.base.rank = r;  g.base.world_size = n;  g.base.store = s;
//   g.base.prefix = "job/gen3/grad";  g.node = "host-a";  g.transport = "auto";
//   ASSIGN_OR_RETURN(CommGroups groups, CreateCommGroups(g));
//   groups.world->AllReduce(...);
//
// Transport "auto": shm when every rank of the group is on one node, gloo
// otherwise (intra: shm, inter: gloo). A forced "shm" on a group that spans
// nodes is INVALID_ARGUMENT naming the nodes
// (a configuration error, not a membership change). "nccl" is used as given
// for every group.
//
// Thread-safety: collective — every rank of the world calls CreateCommGroups
// once per generation with the same options but rank and node. The groups
// own their communicators. Errors: the store's or transport's Status.
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
  std::vector<int> node_of_rank;  // node index of every world rank
  std::string world_transport;    // what "auto" resolved to for world
};

absl::StatusOr<CommGroups> CreateCommGroups(const GroupOptions& options);

}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_GROUPS_H_
