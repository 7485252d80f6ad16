// Terms: the rates and sizes tandem plan's strategy formulas use
// (strategy_cost.cc), and the collectives inside a node, over the world and
// to the shard servers in those terms. Internal to common/plan (a source of
// the strategy_cost target, not a library of its own).
//
//   const Terms t = TermsOf(request, /*servers_run=*/strategy == "ps");
//   double s = WorldAllReduce(t, bytes);
//
// Pure functions over values, thread-safe.
#ifndef TANDEM_COMMON_PLAN_STRATEGY_TERMS_H_
#define TANDEM_COMMON_PLAN_STRATEGY_TERMS_H_

#include "common/plan/collective_cost.h"
#include "common/plan/strategy_cost.h"

namespace tandem {
namespace plan {

constexpr double kFloat = 4;  // bytes per fp32 element

// The rates and sizes every strategy's formulas use.
struct Terms {
  int m = 1, k = 1, n = 1, servers = 0;
  bool replicas = false;  // shard servers send their ranges to replicas
  Link node;           // one node's link (or loopback); alpha: a world ring's round
  double cross_alpha;  // a round of a ring over one rank per node (hier's)
  double server_rate;  // one server's link, bytes/s
  double stream;       // bytes/s one core streams
  double shm_alpha;
  Link intra;          // between a node's ranks when they have a link (gpu: NVLink)
  double codec;
  double flops;        // one rank's GEMM rate after sharing the host's cores
  // A round of shard-server calls (each worker's chunk push + pull) among
  // the host's workers: ShardRoundSeconds, 0 = not measured.
  double call_s = 0;
  // The share of one core's rates each rank's compute gets (flops, stream
  // and codec above are the profile's times this).
  double share = 1;
  // The CPU floor (one_host, a CPU profile; else 0): the profile's CPU
  // seconds per ring round per process (at the host's ranks), per shard
  // call (both ends) and per worker step, and the cores the job's
  // processes get (cores x cpu_share).
  double round_cpu_s = 0;
  double call_cpu_s = 0;
  double step_cpu_s = 0;
  double host_cores = 1;
  double p_bytes;      // the flat vector, bytes
};

// `servers_run`: the strategy keeps the shard servers busy every step (ps,
// hybrid); with one_host they are processes of this host too.
Terms TermsOf(const PlanRequest& r, bool servers_run);

// Collectives inside a node. On a CPU host, shared memory (common/comm/shm):
// each rank copies its buffer in (2B moved), reduces its 1/K slice reading
// all K (B + B/K), copies the result out (2B). Between devices with a link
// of their own (NVLink), NCCL's ring over the K devices.
double ShmAllReduce(const Terms& t, double b);
double ShmReduceScatter(const Terms& t, double b);
double ShmAllGather(const Terms& t, double b);

// Flat collectives over the world: shm on one node, else a ring whose
// slowest hop is a node link (ranks numbered node by node).
double WorldAllReduce(const Terms& t, double b);
double WorldReduceScatter(const Terms& t, double b);
double WorldAllGather(const Terms& t, double b);

// Each of the n ranks sends `per_rank` bytes to the servers (or receives
// them back) in `calls` chunk push + pull round trips, of `distinct`
// bytes of the vector in all: a node's link carries its ranks' share, each
// server's link 1/S of everything (with replicas, 1/S of `distinct` once
// more: its range to its replica out, its neighbour's in); each
// call costs a calibrated round of calls on top (the calls' CPU on both
// ends, gRPC and protobuf, the server's sum and apply, and the waits to be
// scheduled among the host's other processes).
double ServerTransfer(const Terms& t, double per_rank, int senders_per_node, double calls,
                      double distinct);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_STRATEGY_TERMS_H_
