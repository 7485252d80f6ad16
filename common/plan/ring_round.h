// MeasureRingRound: what one latency-bound round of tandem's ring
// collectives costs on this machine, for `tandem plan --calibrate`
// (machine_profile.h: ring_round_2_s ... ring_round_16_s).
//
//   ASSIGN_OR_RETURN(RingRound r, MeasureRingRound(4, 20, 5));  // r.round_s, r.cpu_s
//
// `ranks` forked processes (as tandem's workers are: threads of one
// process measured rounds several times slower here), each with a real
// GlooCommunicator (the transport of every cross-node collective) over
// loopback TCP, meeting through a file store in a fresh temporary folder,
// run `allreduces` ring allreduces of 6 floats (the workers' step vote)
// after one untimed; a ring allreduce over R ranks is 2 (R - 1) rounds, so
// the result is rank 0's time per allreduce / (2 (R - 1)), the median of
// `repetitions` runs (round_s), and the CPU seconds one process spends per
// round (cpu_s: each rank's own CPU clock over its median run, averaged over
// the ranks — what a round costs the host's cores, whatever the wait). Each round is every rank sending on and waiting to
// be woken by its predecessor's message through Gloo's device thread:
// syscalls, thread hand-offs and the scheduler's delay under the machine's
// current load (which a two-thread ping-pong on one socket does not see:
// 5 us measured against 0.6-5 ms per round of tandem's rings at load 20 on
// this 2-core host).
//
// Call it from a single-threaded process (it forks). Not to be run beside
// other heavy work of one's own (it measures the machine). Failure: ranks
// < 2, allreduces or repetitions < 1 are INVALID_ARGUMENT; a failed rank
// (connect, collective: 30 s timeout) or fork / pipe / temporary folder is
// UNAVAILABLE.
#ifndef TANDEM_COMMON_PLAN_RING_ROUND_H_
#define TANDEM_COMMON_PLAN_RING_ROUND_H_

#include "absl/status/statusor.h"

namespace tandem {
namespace plan {

struct RingRound {
  double round_s = 0;  // wall seconds per round
  double cpu_s = 0;    // CPU seconds per round per process
};

absl::StatusOr<RingRound> MeasureRingRound(int ranks, int allreduces, int repetitions);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_RING_ROUND_H_
