// Deterministic parameter initialisation: a small counter-free PRNG
// (SplitMix64) and Box-Muller normals, written out here rather than taken
// from <random> so the same seed gives bit-identical parameters with any
// standard library. Thread-compatible.
#ifndef TANDEM_COMMON_NN_INIT_H_
#define TANDEM_COMMON_NN_INIT_H_

#include <cmath>
#include <cstdint>

namespace tandem {
namespace nn {

class InitRng {
 public:
  explicit InitRng(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 1) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  float Uniform(float lo, float hi) {
    return static_cast<float>(lo + (hi - lo) * Uniform());
  }
  float Normal(float stddev) {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return static_cast<float>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t state_;
};

}  // namespace nn
}  // namespace tandem

#endif  // TANDEM_COMMON_NN_INIT_H_
