#include "common/plan/simulated_burst.h"

#include <algorithm>

namespace tandem {
namespace plan {

int64_t SimulatedBurstBytes(int64_t link_bits_per_s) {
  constexpr int64_t kFloorBytes = 256 * 1024;
  constexpr int64_t kBurstsPerSecond = 250;  // 4 ms of the rate
  return std::max<int64_t>(kFloorBytes, link_bits_per_s / 8 / kBurstsPerSecond);
}

}  // namespace plan
}  // namespace tandem
