#include "common/trace/clock_offset.h"

#include "absl/strings/str_cat.h"
#include "common/trace/clock.h"

namespace tandem {
namespace trace {

absl::StatusOr<ClockEstimate> EstimateClockOffset(const std::vector<ClockSample>& samples) {
  ClockEstimate best;
  for (const ClockSample& s : samples) {
    const int64_t rtt = s.received_ns - s.sent_ns;
    if (rtt < 0) continue;
    if (best.samples == 0 || rtt < best.rtt_ns) {
      best.rtt_ns = rtt;
      // The reply was stamped somewhere in the round trip: its middle is the
      // best guess, and the guess is off by at most rtt / 2.
      best.offset_ns = s.reference_ns - (s.sent_ns + rtt / 2);
    }
    ++best.samples;
  }
  if (best.samples == 0) {
    return absl::InvalidArgumentError("clock offset: no usable round-trip sample");
  }
  return best;
}

absl::StatusOr<ClockEstimate> MeasureClockOffset(
    const std::function<absl::StatusOr<int64_t>()>& reference, int samples,
    const std::function<int64_t()>& local) {
  if (samples < 1) return absl::InvalidArgumentError("clock offset: samples must be >= 1");
  const std::function<int64_t()> now = local ? local : [] { return NowNanos(); };
  std::vector<ClockSample> got;
  absl::Status last;
  for (int i = 0; i < samples; ++i) {
    ClockSample s;
    s.sent_ns = now();
    absl::StatusOr<int64_t> r = reference();
    s.received_ns = now();
    if (!r.ok()) {
      last = r.status();
      continue;
    }
    s.reference_ns = *r;
    got.push_back(s);
  }
  if (got.empty()) {
    return absl::Status(last.code(), absl::StrCat("clock offset: every one of ", samples,
                                                  " samples failed; last: ", last.message()));
  }
  return EstimateClockOffset(got);
}

}  // namespace trace
}  // namespace tandem
