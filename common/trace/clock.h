// The trace time base: nanoseconds of this host's steady clock
// (CLOCK_MONOTONIC). Every trace event is stamped with it, and the
// coordinator's Clock RPC answers with it, so processes on one host agree
// exactly and others align by a measured offset (clock_offset.h).
// Thread-safe.
#ifndef TANDEM_COMMON_TRACE_CLOCK_H_
#define TANDEM_COMMON_TRACE_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace tandem {
namespace trace {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace trace
}  // namespace tandem

#endif  // TANDEM_COMMON_TRACE_CLOCK_H_
