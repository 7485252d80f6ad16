// StrategyCost: the predicted step time, throughput, bytes per link and
// memory per rank of one sync strategy for a model on a cluster — the core
// of `tandem plan`.
//
//   PlanRequest r;  r.model = cost;  r.batch = 64;  r.cluster = {...};  r.machine = profile;
//   ASSIGN_OR_RETURN(Prediction p, Predict(r, "hier"));
//   ASSIGN_OR_RETURN(std::vector<Prediction> all, PredictAll(r));   // fastest first
//
// Step model. Forward and backward take the model's FLOPs at the profile's
// GEMM rate (shared by the ranks of one host when the cluster is simulated
// there). Gradient buckets (common/sync/bucket/bucket_plan, the strategy's own
// plan) become ready as backward passes them and go through the strategy's
// per-bucket collective one at a time, in order, overlapped with the rest of
// backward; what is left when backward ends is exposed. The finish (the
// optimizer step on what this rank owns, plus what a strategy does after the
// last bucket: ZeRO's parameter allgather, the pull of ps's last pipelined
// chunk, zero3's layer gathers that forward and backward do not hide,
// hybrid's landing) is not overlapped, nor is the workers' step vote (a
// 6-float allreduce every step, latency-bound: control_s).
// Collective costs are collective_cost.h's alpha-beta terms; each node's
// link carries what its ranks send (ranks are numbered node by node). A
// round's alpha is the profile's link_alpha_s; with one_host (nodes
// simulated here) RingRoundSeconds(profile, ring size: the world, or the
// nodes for hier's per-local-rank rings): what
// `tandem plan --calibrate` measured a Gloo ring round to cost among that
// many processes of this host (wake-ups and scheduling under its load
// included). hier's K cross-node rings run at once: a bucket costs the
// longer of all K rings' bytes and one ring's rounds plus its own bytes.
// Each chunk ps pushes and pulls (hybrid: each of a rank's own 1/K) costs a
// calibrated shard-server call round (ShardRoundSeconds at the host's
// workers) on top of its bytes; with replicas (PlanRequest::shard_replicas)
// each server's link also carries its range to its replica and its
// neighbour's range in. With one_host, ps's and hybrid's servers
// share the host's cores with the workers: every round, call and the
// compute stretch by (workers + servers) / workers once the processes
// outnumber the cores. Simulated links are token buckets
// (tools/tandem/sim_network.cc, common/plan/simulated_burst.h) whose burst
// refills while a link idles: with one_host a step is shortened by up to
// one burst's time (burst_saved_s), never below its bytes per step over
// the link rate. Each prediction also says what bounds it (link, CPU,
// latency: Prediction::bound).
//
// The CPU floor (one_host on a CPU profile, host_cpu.h): the nodes share
// this host's cores, so a step takes at least the CPU every process of the
// job spends on it over the cores it gets (cores x Cluster::cpu_share). A
// step is the longer of this floor and the latency chain above: at 8 nodes
// x 2 workers with 8 shard servers on 2 cores the floor is what the chain
// misses (a step is 16-24 processes' rounds and calls, one core's worth at
// a time).
//
// On a gpu profile (gpu_profile.h, or one measured on a GPU machine) each
// rank has a device of its own: nothing is shared between a node's ranks
// but its network, and collectives inside a node are rings over the
// profile's intra-node link (NVLink) instead of shared memory; a node with
// no --link uses the profile's node network.
//
// Memory per rank follows each strategy's memory() (SyncMemory) exactly for
// parameters, reduced gradients and optimizer state (tested against the
// real strategies); activations are the model's per-sample floats times the
// batch; staging buffers are not modelled.
//
// Strategies: allreduce, hier, zero1, zero2, ps, hybrid (servers > 0), and
// compressed:int8 / compressed:fp16 / compressed:bf16 / compressed:topk=F /
// compressed:powersgd=R (steady state: the codecs' dense warm-up steps, 200
// for top-k and 10 for PowerSGD by default, are not modelled).
// Thread-safe (pure functions). INVALID_ARGUMENT for an unknown strategy
// (listing the known ones), a bad cluster or batch, ps/hybrid without
// servers.
#ifndef TANDEM_COMMON_PLAN_STRATEGY_COST_H_
#define TANDEM_COMMON_PLAN_STRATEGY_COST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/machine_profile.h"
#include "common/plan/model_cost.h"

namespace tandem {
namespace plan {

struct PlanRequest {
  ModelCost model;
  int batch = 64;                 // per rank per step
  std::string optimizer = "sgd";  // "sgd" or "adamw"
  double momentum = 0.9;          // sgd: 0 keeps no state
  double bucket_cap_mb = 25;
  // ps / hybrid with two or more servers: each server also sends its
  // range's summed gradient to the next server every step (its replica;
  // on by default, `--sync_opt replicate=0` turns it off), so a server's
  // link carries its 1/S of the vector once more each way.
  bool shard_replicas = true;
  Cluster cluster;
  MachineProfile machine;
};

struct Prediction {
  std::string strategy;
  double forward_s = 0;
  double backward_s = 0;
  double comm_s = 0;          // all per-bucket collectives, end to end
  double exposed_comm_s = 0;  // what backward did not hide
  double finish_s = 0;        // optimizer + post-backward communication + control_s
  double optimizer_s = 0;     // the optimizer step (ps, hybrid: on each shard server)
  double control_s = 0;       // the workers' per-step vote (a tiny world allreduce)
  // Simulated links only (one_host): what the shaper's burst saves,
  // subtracted from the sum of the terms above (BurstSaved in the .cc).
  double burst_saved_s = 0;
  // One host (one_host, a CPU profile with the CPU costs calibrated): the
  // CPU seconds every process of the job spends per step (host_cpu_s) over
  // the cores it gets (cpu_floor_s); 0 otherwise.
  double host_cpu_s = 0;
  double cpu_floor_s = 0;
  // host_cpu_s = ranks x (step_cpu_s + worker_work_s + worker_rounds x
  // round_cpu_s + worker_calls x call_cpu_s) + server_cpu_s: one
  // worker's compute, codec and memory passes at one core's rates, the
  // rounds of its gradient collectives' rings (the step vote's are in
  // step_cpu_s), its shard-server calls, the CPU per round used
  // (job_round_cpu_s, else the bare rings' least), per call (both ends) and
  // per worker step beyond those; the shard servers' optimizer (host_cpu.h).
  double worker_work_s = 0;
  double worker_rounds = 0;
  double worker_calls = 0;
  double round_cpu_s = 0;
  double call_cpu_s = 0;
  double step_cpu_s = 0;
  double server_cpu_s = 0;
  // max(forward + backward + exposed + finish - burst_saved, cpu_floor_s)
  double step_s = 0;
  double samples_per_s = 0;   // whole job
  double node_link_bytes = 0;  // per step, leaving one node (0 on one node)
  // Per rank, what memory() reports, plus activations.
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activation_bytes = 0;
  int64_t total_bytes() const {
    return param_bytes + grad_bytes + optimizer_bytes + activation_bytes;
  }
  // Per shard server (ps, hybrid): fp32 master + optimizer state.
  int64_t server_bytes = 0;
  // total_bytes() within the profile's memory per rank (always, when the
  // profile states none).
  bool fits = true;
  // Changes the numbers training sees (compression): worth recommending only
  // where its accuracy has been checked for the job.
  bool lossy = false;
  // "compute", "node link", "intra-node link", "server links", "memory bandwidth"
  std::string bottleneck;
  std::string why;         // one line with the numbers behind `bottleneck`
  // What bounds the step: the seconds it would lose with the links' bytes
  // free (infinite rates), with the CPU free (compute, codec and memory
  // passes, shard-server calls), with every round's latency free (ring
  // rounds, the step vote); `bound` names the largest: "link", "CPU"
  // ("compute" on a gpu profile) or "latency".
  double link_bound_s = 0;
  double cpu_bound_s = 0;
  double latency_bound_s = 0;
  std::string bound;
};

// The strategy names Predict accepts for this cluster, in display order.
std::vector<std::string> PlannedStrategies(const Cluster& cluster);

absl::StatusOr<Prediction> Predict(const PlanRequest& request, const std::string& strategy);

// Gradient buckets the strategies make of `model` with `bucket_cap_mb`
// (the same bucket plan Predict uses).
absl::StatusOr<int> BucketCount(const ModelCost& model, double bucket_cap_mb);

// Every PlannedStrategies entry, fastest first.
absl::StatusOr<std::vector<Prediction>> PredictAll(const PlanRequest& request);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_STRATEGY_COST_H_
