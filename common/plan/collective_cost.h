// The alpha-beta cost of tandem's collectives: time = latency terms
// (alpha per message round) + bytes over the slowest link they cross
// (beta = bytes per second). The formulas are the textbook ones for the
// algorithms tandem runs, written so each can be checked by hand:
//
//   ring allreduce of B bytes over n ranks: each rank sends 2(n-1)/n * B in
//     2(n-1) rounds                      -> 2(n-1) alpha + 2(n-1)/n * B / beta
//   reduce-scatter or allgather (ring):  -> (n-1) alpha + (n-1)/n * B / beta
//   all-to-all of B bytes per rank (each rank keeps 1/n of its own):
//                                        -> (n-1) alpha + (n-1)/n * B / beta
//
// `beta` is the rate of the link the bytes leave by. On tandem's node
// layout (ranks numbered node by node, K per node) a ring over every rank
// crosses each node's link once per direction, so the node's NIC carries
// one rank's ring traffic; K concurrent per-local-rank rings (hierarchical)
// put K rings' traffic on the same NIC. Callers pick beta and the per-link
// byte count accordingly (strategy_cost.cc). Thread-safe (pure functions).
#ifndef TANDEM_COMMON_PLAN_COLLECTIVE_COST_H_
#define TANDEM_COMMON_PLAN_COLLECTIVE_COST_H_

#include <cstdint>

namespace tandem {
namespace plan {

struct Link {
  double alpha_s = 0;      // seconds per message round
  double bytes_per_s = 0;  // > 0
};

// Bytes each rank sends in the collective (what crosses its link).
double RingAllReduceBytes(int n, double bytes);
double RingReduceScatterBytes(int n, double bytes);  // = allgather's, = all-to-all's
// Seconds; n = 1 costs nothing.
double RingAllReduceSeconds(int n, double bytes, const Link& link);
double RingReduceScatterSeconds(int n, double bytes, const Link& link);
double RingAllGatherSeconds(int n, double bytes, const Link& link);
double AllToAllSeconds(int n, double bytes, const Link& link);
// `bytes` through one link in one message: alpha + bytes / beta.
double TransferSeconds(double bytes, const Link& link);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_COLLECTIVE_COST_H_
