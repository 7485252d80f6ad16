#include "common/plan/strategy_terms.h"

#include <algorithm>

#include "common/plan/machine_profile.h"

namespace tandem {
namespace plan {

// Collectives inside a node. On a CPU host, shared memory (common/comm/shm):
// each rank copies its buffer in (2B moved), reduces its 1/K slice reading
// all K (B + B/K), copies the result out (2B). Between devices with a link
// of their own (NVLink), NCCL's ring over the K devices.
double ShmAllReduce(const Terms& t, double b) {
  if (t.k <= 1) return 0;
  if (t.intra.bytes_per_s > 0) return RingAllReduceSeconds(t.k, b, t.intra);
  return 2 * t.shm_alpha + 5 * b / t.stream;
}
double ShmReduceScatter(const Terms& t, double b) {
  if (t.k <= 1) return 0;
  if (t.intra.bytes_per_s > 0) return RingReduceScatterSeconds(t.k, b, t.intra);
  return t.shm_alpha + 3 * b / t.stream;
}
double ShmAllGather(const Terms& t, double b) {
  if (t.k <= 1) return 0;
  if (t.intra.bytes_per_s > 0) return RingAllGatherSeconds(t.k, b, t.intra);
  return t.shm_alpha + 2 * b / t.stream;
}

// Flat collectives over the world: shm on one node, else a ring whose
// slowest hop is a node link (ranks numbered node by node).
double WorldAllReduce(const Terms& t, double b) {
  return t.m == 1 ? ShmAllReduce(t, b) : RingAllReduceSeconds(t.n, b, t.node);
}
double WorldReduceScatter(const Terms& t, double b) {
  return t.m == 1 ? ShmReduceScatter(t, b) : RingReduceScatterSeconds(t.n, b, t.node);
}
double WorldAllGather(const Terms& t, double b) {
  return t.m == 1 ? ShmAllGather(t, b) : RingAllGatherSeconds(t.n, b, t.node);
}

// Each call costs a calibrated round of calls on top (the calls' CPU on
// both ends, gRPC and protobuf, the server's sum and apply, and the waits
// to be scheduled among the host's other processes). The replica's copy
// leaves a server while the workers' pulls do (and its neighbour's
// arrives with their pushes): the same link, each direction.
double ServerTransfer(const Terms& t, double per_rank, int senders_per_node, double calls,
                      double distinct) {
  const double node_s = senders_per_node * per_rank / t.node.bytes_per_s;
  const double server_bytes =
      t.m * senders_per_node * per_rank / t.servers + (t.replicas ? distinct / t.servers : 0);
  const double server_s = server_bytes / t.server_rate;
  return t.node.alpha_s + std::max(node_s, server_s) + calls * t.call_s;
}


// `servers_run`: the strategy keeps the shard servers busy every step (ps,
// hybrid); with one_host they are processes of this host too.
Terms TermsOf(const PlanRequest& r, bool servers_run) {
  const Cluster& c = r.cluster;
  const MachineProfile& mp = r.machine;
  Terms t;
  t.m = c.nodes;
  t.k = c.per_node;
  t.n = c.ranks();
  t.servers = c.servers;
  t.replicas = r.shard_replicas && c.servers >= 2;
  double node_bits = c.link_bits_per_s;
  if (node_bits == 0 && c.nodes > 1) node_bits = mp.node_link_bits_per_s;
  // Nodes simulated on this host: a ring round as calibrated for a ring
  // of that size among its processes (RingRoundSeconds: the world's, or
  // hier's rings of one rank per node); real nodes: link_alpha_s.
  //
  // Oversubscription: the rounds were calibrated among the ranks alone;
  // shard servers of this host running beside them (ps, hybrid) are more
  // processes to schedule, so every round (and the compute) is stretched
  // by the runnable processes over the ranks once they outnumber the cores.
  const int host_ranks = c.one_host ? t.n : t.k;
  const int runnable = host_ranks + (c.one_host && servers_run ? c.servers : 0);
  const double stretch =
      runnable > mp.cores ? static_cast<double>(runnable) / std::max(host_ranks, mp.cores) : 1.0;
  const double alpha = c.one_host ? stretch * RingRoundSeconds(mp, t.n) : mp.link_alpha_s;
  t.node = {alpha, node_bits > 0 ? node_bits / 8 : mp.loopback_bytes_per_s};
  t.cross_alpha = c.one_host ? stretch * RingRoundSeconds(mp, t.m) : mp.link_alpha_s;
  t.server_rate = c.server_link_bits_per_s > 0 ? c.server_link_bits_per_s / 8 : t.node.bytes_per_s;
  t.stream = mp.stream_bytes_per_s;
  t.shm_alpha = mp.shm_alpha_s;
  t.intra = {mp.shm_alpha_s, mp.intra_node_bytes_per_s};
  t.codec = mp.codec_bytes_per_s;
  // Ranks sharing one host's cores: their compute, codec and memory passes
  // all run at that share of the measured one-thread rates. A rank with a
  // device of its own shares nothing.
  const double share =
      mp.per_rank_device() ? 1.0 : std::min(1.0, static_cast<double>(mp.cores) / runnable);
  t.share = share;
  t.flops = mp.gemm_flops_per_s * share;
  if (c.one_host && !mp.per_rank_device()) {
    // Every round of the job's rings at the least CPU a round cost in the
    // calibration: a rank waiting for a round with a core to itself spins
    // (0.5-0.9 ms per round at 2 processes here), which yields to any
    // other work and is no demand on the cores; among 16 processes on 2
    // cores nothing spins (30-36 us per round at load 10-14).
    t.round_cpu_s = RingRoundCpuSeconds(mp, 16);
    for (int ranks : {2, 4, 8}) {
      const double c = RingRoundCpuSeconds(mp, ranks);
      if (c > 0) t.round_cpu_s = std::min(t.round_cpu_s, c);
    }
    // A gradient ring's round in a real job (data in it, the job's other
    // processes scheduled around it) where measured: it costs more than a
    // bare ring's (about 2x at 8x2 here: 67-82 against 35-38 us).
    if (mp.job_round_cpu_s > 0) t.round_cpu_s = mp.job_round_cpu_s;
    t.call_cpu_s = mp.shard_call_cpu_s;
    t.step_cpu_s = mp.step_cpu_s;
    t.host_cores = mp.cores * c.cpu_share;
  }
  t.call_s = stretch * ShardRoundSeconds(mp, host_ranks);
  t.stream *= share;
  t.codec *= share;
  t.p_bytes = r.model.flat_size * kFloat;
  return t;
}

}  // namespace plan
}  // namespace tandem
