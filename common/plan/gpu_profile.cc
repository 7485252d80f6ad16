#include "common/plan/gpu_profile.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace plan {

const std::vector<GpuDatasheet>& GpuDatasheets() {
  // Vendor datasheets (H100/H200: Hopper, 2023-24; A100: Ampere, 2020-21).
  // Nodes: DGX H100/H200 (8 x 400 Gbit/s), DGX A100 (8 x 200 Gbit/s).
  static const auto* sheets = new std::vector<GpuDatasheet>{
      {"h200", "NVIDIA H200 SXM 141GB", 989.4e12, 494.7e12, 66.9e12, 4.8e12, 450e9, 141e9,
       3.2e12},
      {"h100", "NVIDIA H100 SXM5 80GB", 989.4e12, 494.7e12, 66.9e12, 3.35e12, 450e9, 80e9,
       3.2e12},
      {"a100", "NVIDIA A100 SXM4 80GB", 312e12, 156e12, 19.5e12, 2.039e12, 300e9, 80e9, 1.6e12},
  };
  return *sheets;
}

absl::StatusOr<MachineProfile> GpuProfile(const GpuProfileOptions& o) {
  const GpuDatasheet* sheet = nullptr;
  std::vector<std::string> names;
  for (const GpuDatasheet& s : GpuDatasheets()) {
    names.push_back(s.name);
    if (s.name == o.gpu) sheet = &s;
  }
  if (sheet == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu: unknown GPU '", o.gpu, "' (known: ",
                                                   absl::StrJoin(names, ", "), ")"));
  }
  double peak = 0;
  if (o.math == "bf16") peak = sheet->bf16_flops_per_s;
  if (o.math == "tf32") peak = sheet->tf32_flops_per_s;
  if (o.math == "fp32") peak = sheet->fp32_flops_per_s;
  if (peak == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_math: unknown math '", o.math, "' (known: bf16, tf32, fp32)"));
  }
  for (double e : {o.gemm_efficiency, o.bandwidth_efficiency}) {
    if (!(e > 0 && e <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a GPU efficiency factor must be in (0, 1], got ", e));
    }
  }
  MachineProfile p;
  p.kind = "gpu";
  p.cores = 1;
  p.gemm_flops_per_s = peak * o.gemm_efficiency;
  p.stream_bytes_per_s = sheet->hbm_bytes_per_s * o.bandwidth_efficiency;
  // The codecs are memory-bound kernels: int8 reads 4 bytes and writes 1
  // per element, so fp32 bytes in per second = stream / 1.25.
  p.codec_bytes_per_s = p.stream_bytes_per_s / 1.25;
  p.intra_node_bytes_per_s = sheet->nvlink_bytes_per_s * o.bandwidth_efficiency;
  p.node_link_bits_per_s = sheet->node_network_bits_per_s * o.bandwidth_efficiency;
  p.loopback_bytes_per_s = p.node_link_bits_per_s / 8;
  p.link_alpha_s = 15e-6;  // a NCCL ring step across nodes (InfiniBand / RoCE)
  p.shm_alpha_s = 5e-6;    // a NCCL ring step over NVLink
  p.memory_bytes_per_rank = sheet->memory_bytes;
  p.source = absl::StrFormat(
      "datasheet-derived, not measured: %s, %s dense %.0f TFLOP/s x %.2f, HBM %.2f TB/s, NVLink "
      "%.0f GB/s per direction, node network %.1f Tbit/s, bandwidths x %.2f "
      "(tools/gpu/check.sh measures a profile on a GPU machine)",
      sheet->part, o.math, peak / 1e12, o.gemm_efficiency, sheet->hbm_bytes_per_s / 1e12,
      sheet->nvlink_bytes_per_s / 1e9, sheet->node_network_bits_per_s / 1e12,
      o.bandwidth_efficiency);
  return p;
}

}  // namespace plan
}  // namespace tandem
