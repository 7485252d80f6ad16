#include "common/plan/simulated_link.h"

#include <algorithm>

namespace tandem {
namespace plan {

double SimulatedBurstBytes(double link_bits_per_s) {
  return std::max(256.0 * 1024, link_bits_per_s / 8 / 250);
}

double SimulatedBurstSavedSeconds(double step_s, double busy_s, double link_bits_per_s) {
  if (!(link_bits_per_s > 0) || !(busy_s > 0)) return 0;
  const double burst_s = SimulatedBurstBytes(link_bits_per_s) / (link_bits_per_s / 8);
  return std::max(0.0, std::min({burst_s, busy_s, step_s - busy_s}));
}

}  // namespace plan
}  // namespace tandem
