// HybridSplit: how much of the vector `--sync hybrid` sends by a cross-node
// ring instead of through the shard servers (--sync_opt ring_share=auto|F,
// BytePS's use of the workers' spare bandwidth; issue 33).
//
// Per step, with n the model's bytes, N nodes, S shard servers and a share
// f of the vector by the ring (the rest pushed to and pulled from the
// servers), each direction of a link carries:
//   a node's link:   f n 2 (N - 1) / N  (ring allreduce among the nodes)
//                    + (1 - f) n        (its push, or its pull)
//   a server's link: N (1 - f) n / S    (every node's push, or pull)
// The step is as slow as the busier of the two. With S >= N the server
// links are no busier than the node links at f = 0, so f = 0 (everything
// through the servers); with fewer servers both are equal at
//   f = (N/S - 1) / (2 (N - 1)/N + N/S - 1)     (4 nodes, 2 servers: 0.4).
// Links are taken to run at the same rate (a worker does not know the
// simulated links' rates).
//
//   ASSIGN_OR_RETURN(RingSplit s, ChooseRingSplit({"auto", nodes, servers, n, unit}));
//   LOG(INFO) << s.why;       // ring elements [0, s.ring_size), the rest by servers
//
// The ring part is a prefix [0, ring_size) of the vector, rounded to whole
// units (hybrid: one group of chunks, chunk elements x ranks per node) and
// never the whole vector (at least one unit stays with the servers).
// Pure functions; thread-safe. A bad value is INVALID_ARGUMENT naming it.
#ifndef TANDEM_COMMON_SYNC_REMOTE_HYBRID_SPLIT_H_
#define TANDEM_COMMON_SYNC_REMOTE_HYBRID_SPLIT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {
namespace sync {

struct RingSplitInputs {
  std::string spec = "0";  // --sync_opt ring_share: "auto" or a share in [0, 1)
  int nodes = 1;
  int servers = 1;
  int64_t size = 0;  // elements of the vector
  int64_t unit = 1;  // the ring part is a whole number of these
};

struct RingSplit {
  double share = 0;       // f before rounding
  int64_t ring_size = 0;  // elements [0, ring_size) go by the ring
  std::string why;        // one line for the job's start: f, how it was chosen, the rounding
};

// The formula above: the share that makes node and server links equally
// busy, 0 when the servers are not the bottleneck (S >= N or one node).
double AutoRingShare(int nodes, int servers);

// The ring_share of a job that names none: "auto" where the shard servers
// keep no replicas anyway (one server, or replicate=0), since the split then
// costs nothing on recovery; "0" where they keep replicas (a replica cannot
// restore the ring part, so the split would turn them off and a lost server
// would go back to the last checkpoint) and where pushes are int8 (which the
// split refuses). A named ring_share always wins.
std::string DefaultRingShare(int servers, bool replicate, bool int8_pushes);

// Parses the spec and rounds f x size to whole units.
absl::StatusOr<RingSplit> ChooseRingSplit(const RingSplitInputs& in);

}  // namespace sync
}  // namespace tandem

#endif  // TANDEM_COMMON_SYNC_REMOTE_HYBRID_SPLIT_H_
