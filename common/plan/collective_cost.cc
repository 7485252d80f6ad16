#include "common/plan/collective_cost.h"

namespace tandem {
namespace plan {

double RingAllReduceBytes(int n, double bytes) {
  return n <= 1 ? 0 : 2.0 * (n - 1) / n * bytes;
}

double RingReduceScatterBytes(int n, double bytes) {
  return n <= 1 ? 0 : 1.0 * (n - 1) / n * bytes;
}

double RingAllReduceSeconds(int n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * link.alpha_s + RingAllReduceBytes(n, bytes) / link.bytes_per_s;
}

double RingReduceScatterSeconds(int n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  return 1.0 * (n - 1) * link.alpha_s + RingReduceScatterBytes(n, bytes) / link.bytes_per_s;
}

double RingAllGatherSeconds(int n, double bytes, const Link& link) {
  return RingReduceScatterSeconds(n, bytes, link);
}

double AllToAllSeconds(int n, double bytes, const Link& link) {
  return RingReduceScatterSeconds(n, bytes, link);
}

double TransferSeconds(double bytes, const Link& link) {
  return link.alpha_s + bytes / link.bytes_per_s;
}

}  // namespace plan
}  // namespace tandem
