// MeasureRingRound: what one latency-bound round of tandem's ring
// collectives costs on this machine, for `tandem plan --calibrate`
// (machine_profile.h: ring_round_2_s ... ring_round_16_s).
//
//   ASSIGN_OR_RETURN(double s, MeasureRingRound(4, 20, 5));  // seconds per round
//
// `ranks` threads, each with a real GlooCommunicator (the transport every
// cross-node collective of tandem uses) over loopback TCP and an in-memory
// store, run `allreduces` ring allreduces of 6 floats (the workers' step
// vote) after one untimed; a ring allreduce over R ranks is 2 (R - 1)
// rounds, so the result is the time per allreduce / (2 (R - 1)), the
// median of `repetitions` runs. Each round is every rank sending on and
// waiting to be woken by its predecessor's message through Gloo's device
// thread: syscalls, thread hand-offs and the scheduler's delay under the
// machine's current load (which a two-thread ping-pong on one socket does
// not see: 5 us measured against about 1 ms per round of tandem's rings at
// load 20 on this 2-core host).
//
// Not thread-safe with other heavy work (it measures the machine). Failure:
// ranks < 2, allreduces or repetitions < 1 are INVALID_ARGUMENT; a Gloo
// error (connect, collective) is returned as the communicator reports it.
#ifndef TANDEM_COMMON_PLAN_RING_ROUND_H_
#define TANDEM_COMMON_PLAN_RING_ROUND_H_

#include "absl/status/statusor.h"

namespace tandem {
namespace plan {

absl::StatusOr<double> MeasureRingRound(int ranks, int allreduces, int repetitions);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_RING_ROUND_H_
