// Estimates the offset from this process's trace clock (NowNanos) to a
// reference clock (the coordinator's), NTP-style: ask the reference for its
// time a few times and keep the sample with the smallest round trip; its
// offset is reference - (send + receive) / 2, wrong by at most half that
// round trip.
//
//   ASSIGN_OR_RETURN(ClockEstimate e, MeasureClockOffset(ask_coordinator, 8));
//   aligned_ns = local_ns + e.offset_ns;
//
// Thread-compatible (pure, apart from the calls it makes). Fails when every
// sample failed (the last error, prefixed) or `samples` < 1.
#ifndef TANDEM_COMMON_TRACE_CLOCK_OFFSET_H_
#define TANDEM_COMMON_TRACE_CLOCK_OFFSET_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {
namespace trace {

struct ClockSample {
  int64_t sent_ns = 0;       // local clock when the request left
  int64_t reference_ns = 0;  // the reference's clock in its reply
  int64_t received_ns = 0;   // local clock when the reply arrived
};

struct ClockEstimate {
  int64_t offset_ns = 0;  // reference - local
  int64_t rtt_ns = 0;     // of the sample used; the error is at most rtt / 2
  int samples = 0;        // usable samples seen
};

// The estimate from `samples` (those with received < sent are ignored);
// InvalidArgument when none is usable.
absl::StatusOr<ClockEstimate> EstimateClockOffset(const std::vector<ClockSample>& samples);

// Takes `samples` samples: reference() returns the reference's clock in ns;
// local() is this process's clock (NowNanos unless a test fakes it).
absl::StatusOr<ClockEstimate> MeasureClockOffset(
    const std::function<absl::StatusOr<int64_t>()>& reference, int samples,
    const std::function<int64_t()>& local = nullptr);

}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_CLOCK_OFFSET_H_
