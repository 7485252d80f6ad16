// SimulatedBurstSavedSeconds: what the shaper of `tandem local --nodes`
// gives a step beyond its nominal rate, for `tandem plan --one_host`.
//
// tools/tandem/sim_network.cc shapes what each simulated node (and shard
// server) sends with an HTB token bucket of rate R and burst
// SimulatedBurstBytes(R) (simulated_burst.h, the rule both use).
// Tokens refill while the link idles — the step's compute, its
// latency-bound rounds, the workers' vote — and the next transfer spends
// them at line speed. A step of `step_s` seconds whose links (a node's,
// a shard server's: each is its own bucket) are busy `busy_s[l]` of it at
// the nominal rate (their bytes / R) therefore saves
//
//   min(sum over l of min(burst / R, busy_s[l], step_s - busy_s[l]),
//       step_s - max busy_s)
//
// seconds: per link no more than a burst, than its transfer, than the idle
// time that refilled its bucket; in all never below the busiest link's
// transfer (over many steps a link carries no more than R). Links busy one
// after the other (ps's pushes, then the servers' pulls) each save their
// own burst. 0 for an unshaped link (rate 0) or no bytes.
//
//   double saved = SimulatedBurstSavedSeconds(0.035, {0.0244}, 100e6);  // 10.6 ms
//
// Pure functions, thread-safe.
#ifndef TANDEM_COMMON_PLAN_SIMULATED_LINK_H_
#define TANDEM_COMMON_PLAN_SIMULATED_LINK_H_

#include <vector>

namespace tandem {
namespace plan {

double SimulatedBurstSavedSeconds(double step_s, const std::vector<double>& busy_s,
                                  double link_bits_per_s);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_SIMULATED_LINK_H_
