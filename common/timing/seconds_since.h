// SecondsSince(start): the seconds a steady clock has advanced since
// `start`, as a double: the one stopwatch the strategies, the bucket engine
// and the shard server time their phases with (optimizer seconds, busy
// seconds, push and pull durations).
//
//   const auto start = std::chrono::steady_clock::now();
//   ... work ...
//   stats.busy_seconds += SecondsSince(start);
//
// Thread-safe (a pure function of the clock).
#ifndef TANDEM_COMMON_TIMING_SECONDS_SINCE_H_
#define TANDEM_COMMON_TIMING_SECONDS_SINCE_H_

#include <chrono>

namespace tandem {

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tandem

#endif  // TANDEM_COMMON_TIMING_SECONDS_SINCE_H_
