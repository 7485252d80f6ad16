// SimulatedBurstBytes: the token-bucket burst of every shaped link of
// `tandem local --nodes` — the one rule both the shaper
// (tools/tandem/sim_network.cc, each node's and shard server's HTB class)
// and `tandem plan --one_host` (simulated_link.h: what the burst saves a
// step) use, so they cannot drift apart.
//
// The burst is 256 KiB, or 4 ms of the rate when that is more: lo sends up
// to 64 KiB segments, so a burst of a few of them; measured here, one TCP
// stream: 1 ms of burst held 10gbit to 7.8 Gbit/s, 4 ms to 9.1 (unshaped:
// 12-13).
//
//   int64_t b = SimulatedBurstBytes(100'000'000);  // 262144
//
// Pure function, thread-safe. A rate <= 0 (unshaped) gives the 256 KiB floor.
#ifndef TANDEM_COMMON_PLAN_SIMULATED_BURST_H_
#define TANDEM_COMMON_PLAN_SIMULATED_BURST_H_

#include <cstdint>

namespace tandem {
namespace plan {

int64_t SimulatedBurstBytes(int64_t link_bits_per_s);

}  // namespace plan
}  // namespace tandem

#endif  // TANDEM_COMMON_PLAN_SIMULATED_BURST_H_
