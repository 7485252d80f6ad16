// Mix64: SplitMix64's finaliser, a fast bijective 64-bit mix for seeds and
// counter-based random numbers (every rank computes the same value from the
// same inputs, with no shared generator state). Header only; thread-safe
// (a pure function).
#ifndef TANDEM_COMMON_NUMERIC_MIX64_H_
#define TANDEM_COMMON_NUMERIC_MIX64_H_

#include <cstdint>

namespace tandem {
namespace numeric {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace numeric
}  // namespace tandem

#endif  // TANDEM_COMMON_NUMERIC_MIX64_H_
