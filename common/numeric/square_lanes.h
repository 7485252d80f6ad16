// SquareLanes: the sum of squares of fp32 values in double, the way every
// gradient-norm pass of tandem accumulates it (the optimizers' clip and
// non-finite check, common/optim/clip.h; the shm allreduce's fused sum,
// common/comm/shm/reduce_slots.h): eight independent double lanes (lane j
// takes the elements j mod 8 of each Add), which GCC vectorises without
// reassociating, so every vector width gives the same bits, folded in a
// fixed tree. Squares of fp32 values are exact in double, so contraction
// into FMA changes nothing; the sum is non-finite exactly when an element is.
//
//   numeric::SquareLanes s;
//   s.Add(block, len);  // any number of times; len a multiple of 8 keeps
//   s.Add(next, len2);  // the lanes aligned with the elements' indices
//   double sum_sq = s.Sum();
//
// A value type, header only; inline into each caller's vector build
// (cpu_dispatch.h). Not thread-safe (one per thread).
#ifndef TANDEM_COMMON_NUMERIC_SQUARE_LANES_H_
#define TANDEM_COMMON_NUMERIC_SQUARE_LANES_H_

#include <cstdint>

namespace tandem {
namespace numeric {

struct SquareLanes {
  double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};

  // Adds the squares of x[0, n).
  inline __attribute__((always_inline)) void Add(const float* __restrict x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) {
        const double v = x[i + j];
        a[j] += v * v;
      }
    }
    for (int j = 0; i < n; ++i, ++j) {
      const double v = x[i];
      a[j] += v * v;
    }
  }

  double Sum() const { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }
};

}  // namespace numeric
}  // namespace tandem

#endif  // TANDEM_COMMON_NUMERIC_SQUARE_LANES_H_
