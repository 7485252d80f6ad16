// The coordinator's clock as a ProcessTraceOptions::reference_clock: each
// call is one Clock RPC (1 s deadline, no retry) to `address` (host:port),
// returning the coordinator's NowNanos. The channel is made once.
//
//   o.reference_clock = CoordinatorClock("10.0.0.1:7000");
//
// Thread-safe. A call fails with the RPC's status ("Coordinator.Clock: ...").
#ifndef TANDEM_COMMON_TRACE_COORDINATOR_CLOCK_H_
#define TANDEM_COMMON_TRACE_COORDINATOR_CLOCK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {
namespace trace {

std::function<absl::StatusOr<int64_t>()> CoordinatorClock(const std::string& address);

}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_COORDINATOR_CLOCK_H_
