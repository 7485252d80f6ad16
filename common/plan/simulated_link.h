// SimulatedBurstSavedSeconds: what the shaper of `tandem local --nodes`
// gives a step beyond its nominal rate, for `tandem plan --one_host`.
//
// tools/tandem/sim_network.cc shapes what each simulated node (and shard
// server) sends with an HTB token bucket of rate R and burst
// SimulatedBurstBytes(R) = max(256 KiB, 4 ms of R) (keep the two in step).
// Tokens refill while the link idles — the step's compute, its
// latency-bound rounds, the workers' vote — and the next transfer spends
// them at line speed. A step of `step_s` seconds whose link is busy
// `busy_s` of them at the nominal rate (its bytes / R) therefore saves
//
//   min(burst / R, busy_s, step_s - busy_s)
//
// seconds: no more than a burst, no more than the transfer itself, and no
// more than the idle time that refilled the bucket (so over many steps the
// link still carries no more than R: the step never drops below busy_s).
// 0 for an unshaped link (rate 0).
//
//   double saved = SimulatedBurstSavedSeconds(0.035, 0.0244, 100e6);  // 10.6 ms
//
// Pure functions, thread-safe.
#ifndef TANDEM_COMMON_PLAN_SIMULATED_LINK_H_
#define TANDEM_COMMON_PLAN_SIMULATED_LINK_H_

namespace tandem {
namespace plan {

double SimulatedBurstBytes(double link_bits_per_s);
double SimulatedBurstSavedSeconds(double step_s, double busy_s, double link_bits_per_s);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_SIMULATED_LINK_H_
