// Probes the CUDA devices this process can see. Used by the backend factory
// (fall back to CPU when there is none), by gpu tests (GTEST_SKIP without a
// device) and by the benchmark's header line.
//
//   ASSIGN_OR_RETURN(DeviceInfo info, ProbeDevice(0));
//
// Thread-safe. Fails with kUnavailable when the driver or device is missing
// (the usual case on a CPU-only machine), never aborts.
#ifndef TANDEM_COMMON_KERNELS_CUDA_DEVICE_H_
#define TANDEM_COMMON_KERNELS_CUDA_DEVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {
namespace cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int64_t total_memory_bytes = 0;
  int64_t free_memory_bytes = 0;  // at probe time
};

// Number of visible devices; kUnavailable when the CUDA runtime cannot find
// a driver or device.
absl::StatusOr<int> DeviceCount();

// True iff DeviceCount() succeeds with at least one device.
bool HasDevice();

// Properties of device `ordinal` (makes it current for this thread).
absl::StatusOr<DeviceInfo> ProbeDevice(int ordinal);

// One line for logs: "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
std::string DescribeDevice(const DeviceInfo& info);

}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_COMMON_KERNELS_CUDA_DEVICE_H_
