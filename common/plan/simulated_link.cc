#include "common/plan/simulated_link.h"

#include <algorithm>

#include "common/plan/simulated_burst.h"

namespace tandem {
namespace plan {

double SimulatedBurstSavedSeconds(double step_s, const std::vector<double>& busy_s,
                                  double link_bits_per_s) {
  if (!(link_bits_per_s > 0) || busy_s.empty()) return 0;
  const double burst_s =
      static_cast<double>(SimulatedBurstBytes(static_cast<int64_t>(link_bits_per_s))) /
      (link_bits_per_s / 8);
  double saved = 0, busiest = 0;
  for (double b : busy_s) {
    if (!(b > 0)) continue;
    saved += std::max(0.0, std::min({burst_s, b, step_s - b}));
    busiest = std::max(busiest, b);
  }
  return std::max(0.0, std::min(saved, step_s - busiest));
}

}  // namespace plan
}  // namespace tandem
