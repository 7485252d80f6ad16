// MachineProfile: the rates the cost model turns work into time — one
// rank's GEMM FLOP/s, a core's memory bandwidth, the codec's rate, message
// latencies — plus the Cluster (nodes, ranks per node, shard servers, link
// rates) a plan is for. `tandem plan --calibrate` measures a profile on this
// machine and saves it as `key = value` lines; `tandem plan` loads it (or
// uses the documented defaults, which say so in `source`).
//
//   ASSIGN_OR_RETURN(MachineProfile p, LoadMachineProfile(path));
//   RETURN_IF_ERROR(SaveMachineProfile(p, path));
//
// Thread-safe (values and pure functions). Failure: a missing file is
// NOT_FOUND; an unknown key, an unparsable or non-positive value is
// INVALID_ARGUMENT naming the file, the line and the key.
#ifndef TANDEM_COMMON_PLAN_MACHINE_PROFILE_H_
#define TANDEM_COMMON_PLAN_MACHINE_PROFILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {
namespace plan {

struct MachineProfile {
  // One rank's training GEMMs (sgemm at the model's shapes), FLOP/s.
  double gemm_flops_per_s = 50e9;
  // Bytes read plus written per second by one core streaming through
  // memory (a memcpy of B bytes moves 2B): optimizer steps, shm reductions.
  double stream_bytes_per_s = 20e9;
  // int8 encode (or decode) rate, fp32 bytes in per second.
  double codec_bytes_per_s = 5e9;
  // Unshaped TCP between two processes on one host (Gloo, gRPC), bytes/s.
  double loopback_bytes_per_s = 2e9;
  double link_alpha_s = 100e-6;  // per message round across a link
  // Seconds per round of a ring collective of 2, 4, 8, 16 processes of this
  // host (Gloo over loopback TCP; RingRoundSeconds), measured by
  // `tandem plan --calibrate`; 0 = not measured (link_alpha_s is used).
  double ring_round_2_s = 0;
  double ring_round_4_s = 0;
  double ring_round_8_s = 0;
  double ring_round_16_s = 0;
  // Seconds per round of shard-server calls with 2, 4, 8, 16 worker
  // processes of this host each pushing a small chunk to one server
  // process and pulling it back (ShardRoundSeconds), measured by
  // `tandem plan --calibrate`: the calls' CPU on both ends and the waits
  // to be scheduled. 0 = not measured (a ps / hybrid call then costs its
  // bytes and link_alpha_s only).
  double shard_round_2_s = 0;
  double shard_round_4_s = 0;
  double shard_round_8_s = 0;
  double shard_round_16_s = 0;
  // The CPU the step's processes cost the host's cores, whatever they wait
  // for (the CPU floor of a step on one host, strategy_cost.h):
  // CPU seconds one process spends per ring round with 2, 4, 8, 16
  // processes in the ring (RingRoundCpuSeconds; each rank's own CPU clock,
  // measured with the ring rounds); CPU seconds one shard-server chunk push
  // + pull costs the worker and the server together; CPU seconds a worker
  // spends per step beyond its compute, rounds and calls (its data fetch,
  // the trainer's loop, metrics). tandem plan --calibrate measures the
  // rounds and a call between bare processes; tools/bench/
  // plan_vs_measured.sh --calibrate measures step_cpu_s and the call on
  // two short real jobs (tandem local). 0 = not measured.
  double ring_round_cpu_2_s = 0;
  double ring_round_cpu_4_s = 0;
  double ring_round_cpu_8_s = 0;
  double ring_round_cpu_16_s = 0;
  double shard_call_cpu_s = 0;
  double step_cpu_s = 0;
  // CPU seconds one worker spends per round of its gradient collectives'
  // rings in a real job (data in every round, the job's own processes
  // around it), measured by plan_vs_measured.sh --calibrate from a flat and
  // a hierarchical ring job; when set, the CPU floor uses it instead of the
  // bare rings' least ring_round_cpu_*_s. 0 = not measured.
  double job_round_cpu_s = 0;
  double shm_alpha_s = 5e-6;     // per shared-memory round (a barrier)
  int cores = 1;                 // cores the ranks of one host share
  std::string source = "built-in defaults (run `tandem plan --calibrate`)";
  // "cpu": the ranks of one host share its `cores` (and their rates);
  // "gpu": each rank has a device of its own, at the full rates above.
  std::string kind = "cpu";
  // Between the ranks of one node, per direction per rank (gpu: NVLink);
  // 0 = the host's shared memory at stream_bytes_per_s.
  double intra_node_bytes_per_s = 0;
  // Each node's network when the cluster names no link (gpu: the reference
  // node's NICs together), bits/s; 0 = the loopback rate.
  double node_link_bits_per_s = 0;
  // Memory one rank may hold (gpu: the device's), bytes; 0 = not checked.
  double memory_bytes_per_rank = 0;
  bool per_rank_device() const { return kind == "gpu"; }
};

// Where the ranks run and what connects them.
struct Cluster {
  int nodes = 1;
  int per_node = 1;   // ranks (workers) per node
  int servers = 0;    // shard servers (ps, hybrid)
  // Each node's link, bits per second, per direction; 0 = unshaped (the
  // profile's loopback rate: the nodes are processes of one host).
  double link_bits_per_s = 0;
  double server_link_bits_per_s = 0;  // 0 = link_bits_per_s
  // Every node is simulated on this one machine (`tandem local --nodes`):
  // all ranks share the profile's cores.
  bool one_host = false;
  // one_host: the share of the host's cores the job's processes get
  // (1: an otherwise idle host; 0.5: other work takes half of them).
  double cpu_share = 1;
  int ranks() const { return nodes * per_node; }
};

absl::Status ValidateCluster(const Cluster& c);

// Seconds per round of a ring of `ranks` processes on the profile's host:
// the measured ring_round_*_s interpolated linearly in log2(ranks) between
// the two nearest measured sizes, the nearest one's outside them;
// link_alpha_s when none was measured.
double RingRoundSeconds(const MachineProfile& p, int ranks);

// CPU seconds per process per round of a ring among `ranks` processes of
// the profile's host, interpolated as RingRoundSeconds; 0 when none was
// measured.
double RingRoundCpuSeconds(const MachineProfile& p, int ranks);

// Seconds per round of shard-server calls among `workers` processes of the
// profile's host, interpolated as RingRoundSeconds; 0 when none was measured.
double ShardRoundSeconds(const MachineProfile& p, int workers);

std::string FormatMachineProfile(const MachineProfile& p);
absl::StatusOr<MachineProfile> ParseMachineProfile(const std::string& text,
                                                   const std::string& origin);
absl::StatusOr<MachineProfile> LoadMachineProfile(const std::string& path);
absl::Status SaveMachineProfile(const MachineProfile& p, const std::string& path);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_MACHINE_PROFILE_H_
