// Calibration: measures this machine's rates for the cost model
// (machine_profile.h) — the model's own forward + backward on the CPU
// backend (so "GEMM rate at the model's shapes" includes everything a step
// runs), memory streaming, the int8 codec, loopback TCP bandwidth, and the
// cost of one ring round among 2 and 8 rank threads of this host (what a
// latency-bound collective round costs under the machine's load).
// Each number is the median of several timed repetitions.
//
//   ASSIGN_OR_RETURN(MachineProfile p, Calibrate(CalibrateOptions{...}));
//
// Not thread-safe with other heavy work (it measures the machine: run it
// alone). Failure: a bad model spec is INVALID_ARGUMENT; a socket error
// is UNAVAILABLE naming the call. Takes a few seconds.
#ifndef TANDEM_COMMON_PLAN_CALIBRATE_H_
#define TANDEM_COMMON_PLAN_CALIBRATE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/plan/machine_profile.h"

namespace tandem {
namespace plan {

struct CalibrateOptions {
  std::string model = "mlp:784,1024,1024,10";  // the shapes to time
  int batch = 64;
  int repetitions = 5;
  int64_t stream_bytes = 64 << 20;    // buffer for the streaming measurement
  int64_t loopback_bytes = 64 << 20;  // bytes per loopback transfer
};

absl::StatusOr<MachineProfile> Calibrate(const CalibrateOptions& options);

// The parts, for tests and for `tandem plan --calibrate` to print.
absl::StatusOr<double> MeasureModelFlops(const std::string& model, int batch, int repetitions);
double MeasureStreamBytesPerSecond(int64_t bytes, int repetitions);
// The int8 codec (common/sync, the compressed strategy's default), fp32
// bytes per second per pass (encode with error feedback, decode).
absl::StatusOr<double> MeasureCodecBytesPerSecond(int64_t values, int repetitions);
struct LoopbackRates {
  double bytes_per_s = 0;
  double round_trip_s = 0;
};
absl::StatusOr<LoopbackRates> MeasureLoopback(int64_t bytes, int repetitions);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_CALIBRATE_H_
