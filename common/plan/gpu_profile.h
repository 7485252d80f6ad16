// GPU machine profiles from published device figures, for planning the
// clusters users train on (`tandem plan --gpu h100`) before any of their
// GPUs has been measured. Each profile is the datasheet's dense rate for
// the chosen math, HBM bandwidth, NVLink per direction and the reference
// node's network (8 GPUs per node, one NIC per GPU), each times a stated
// efficiency factor, and says so in `source`: a measured profile
// (tools/gpu/check.sh writes one on a GPU machine; `tandem plan --profile`
// reads it) replaces it.
//
//   ASSIGN_OR_RETURN(MachineProfile p, GpuProfile({.gpu = "h100", .math = "bf16"}));
//
// Thread-safe (pure functions). INVALID_ARGUMENT for an unknown GPU or
// math (listing the known ones) or an efficiency outside (0, 1].
#ifndef TANDEM_COMMON_PLAN_GPU_PROFILE_H_
#define TANDEM_COMMON_PLAN_GPU_PROFILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/plan/machine_profile.h"

namespace tandem {
namespace plan {

// One device as its vendor publishes it (SXM parts, dense: no sparsity).
struct GpuDatasheet {
  std::string name;            // "h100"
  std::string part;            // "NVIDIA H100 SXM5 80GB"
  double bf16_flops_per_s;     // tensor cores, dense
  double tf32_flops_per_s;     // tensor cores, dense
  double fp32_flops_per_s;     // CUDA cores
  double hbm_bytes_per_s;
  double nvlink_bytes_per_s;   // per direction (half the quoted total)
  double memory_bytes;
  double node_network_bits_per_s;  // the reference 8-GPU node's NICs together
};

struct GpuProfileOptions {
  std::string gpu = "h100";   // h200, h100, a100
  std::string math = "bf16";  // the GEMMs' math: bf16, tf32 or fp32
  // Achieved / datasheet: GEMM rate at training shapes (what large
  // transformer runs report as model FLOP utilisation), and the share of
  // HBM, NVLink and network bandwidth collectives and optimizer passes reach.
  double gemm_efficiency = 0.5;
  double bandwidth_efficiency = 0.8;
};

const std::vector<GpuDatasheet>& GpuDatasheets();

absl::StatusOr<MachineProfile> GpuProfile(const GpuProfileOptions& options);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_GPU_PROFILE_H_
