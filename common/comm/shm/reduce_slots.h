// The reduction kernel of the shared-memory collectives (ShmCommunicator's
// allreduce, reduce-scatter and the ZeRO piece collectives): dst[i] = op
// over s of src[s][i], in source order (rank order), blocked so dst stays in
// L1 across the passes, each pass a plain loop the compiler vectorises;
// optionally the sum of squares of dst, from L1, in the same blocks.
// Internal to //common/comm/shm. Stateless; thread-safe.
#ifndef TANDEM_COMMON_COMM_SHM_REDUCE_SLOTS_H_
#define TANDEM_COMMON_COMM_SHM_REDUCE_SLOTS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/numeric/cpu_dispatch.h"
#include "common/numeric/square_lanes.h"

namespace tandem {
namespace shm_internal {

struct Sum {
  float operator()(float a, float b) const { return a + b; }
};
struct Max {
  float operator()(float a, float b) const { return a > b ? a : b; }
};

// n >= 2 sources; dst must not alias a source. When `copy` is
// non-null each finished block is also copied there (from L1); `copy` may
// be one of the sources: a block is copied only after it has been read.
// When `sum_sq` is non-null, *sum_sq += the sum of squares of dst[0, count)
// (non-finite exactly when an element of dst is).
template <typename Op>
inline __attribute__((always_inline)) void ReduceSlotsBody(float* dst, const float* const* src,
                                                           int n, int64_t count, float* copy,
                                                           double* sum_sq) {
  constexpr int64_t kBlock = 2048;
  const Op op;
  numeric::SquareLanes squares;  // blocks are multiples of 8: lanes follow the index
  for (int64_t b = 0; b < count; b += kBlock) {
    const int64_t len = std::min(kBlock, count - b);
    {
      float* __restrict d = dst + b;
      const float* __restrict s0 = src[0] + b;
      const float* __restrict s1 = src[1] + b;
      for (int64_t i = 0; i < len; ++i) d[i] = op(s0[i], s1[i]);
      for (int s = 2; s < n; ++s) {
        const float* __restrict sr = src[s] + b;
        for (int64_t i = 0; i < len; ++i) d[i] = op(d[i], sr[i]);
      }
    }
    if (sum_sq != nullptr) squares.Add(dst + b, len);
    if (copy != nullptr) std::memcpy(copy + b, dst + b, len * sizeof(float));
  }
  if (sum_sq != nullptr) *sum_sq += squares.Sum();
}

// The build targets x86-64-v2 (128-bit vectors); the reduction is also
// compiled for AVX2 and AVX-512 and picked per CPU on first use
// (cpu_dispatch.h; a template, so the macro's plain functions do not fit).
template <typename Op>
TANDEM_CPU_TARGET_AVX512 void ReduceSlotsAvx512(float* dst, const float* const* src, int n,
                                                int64_t count, float* copy, double* sum_sq) {
  ReduceSlotsBody<Op>(dst, src, n, count, copy, sum_sq);
}

template <typename Op>
TANDEM_CPU_TARGET_AVX2 void ReduceSlotsAvx2(float* dst, const float* const* src, int n,
                                            int64_t count, float* copy, double* sum_sq) {
  ReduceSlotsBody<Op>(dst, src, n, count, copy, sum_sq);
}

template <typename Op>
void ReduceSlots(float* dst, const float* const* src, int n, int64_t count, float* copy = nullptr,
                 double* sum_sq = nullptr) {
  switch (numeric::ActiveVectorWidth()) {
    case numeric::VectorWidth::kAvx512:
      ReduceSlotsAvx512<Op>(dst, src, n, count, copy, sum_sq);
      break;
    case numeric::VectorWidth::kAvx2:
      ReduceSlotsAvx2<Op>(dst, src, n, count, copy, sum_sq);
      break;
    default:
      ReduceSlotsBody<Op>(dst, src, n, count, copy, sum_sq);
  }
}

}  // namespace shm_internal
}  // namespace tandem

#endif  // TANDEM_COMMON_COMM_SHM_REDUCE_SLOTS_H_
