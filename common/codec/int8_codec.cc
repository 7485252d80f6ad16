#include "common/codec/int8_codec.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "common/log/log.h"
#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace codec {
namespace {

// Vectorisable 32-bit mix (lowbias32): the dither must be cheap enough to
// run once per element inside the quantize loop.
TANDEM_CPU_INLINE uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

TANDEM_CPU_INLINE uint32_t SeedWord(uint64_t seed) {
  return Mix32(static_cast<uint32_t>(seed) ^ Mix32(static_cast<uint32_t>(seed >> 32) + 0x9e3779b9u));
}

// 24 random bits as a float in [0, 1); through int32 because x86 before
// AVX-512 has no vector unsigned-to-float conversion.
TANDEM_CPU_INLINE float Dither(uint32_t seed_word, uint32_t i) {
  return static_cast<float>(static_cast<int32_t>(Mix32(i * 0x9e3779b1u ^ seed_word) >> 8)) *
         (1.0f / 16777216.0f);
}

// max |x| over m values, on the bit patterns: for non-negative floats the
// integer order is the float order, and an integer max vectorises without
// -ffast-math. A NaN (bits above inf) wins, so its chunk's scale is NaN.
TANDEM_CPU_INLINE float MaxAbs(const float* __restrict x, int64_t m) {
  uint32_t best = 0;
  for (int64_t i = 0; i < m; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof(u));
    u &= 0x7fffffffu;
    best = best > u ? best : u;
  }
  float f;
  std::memcpy(&f, &best, sizeof(f));
  return f;
}

// The code of v: round(v * inv) (|v * inv| <= 127 by the choice of inv,
// so nearest needs no clamp), or floor(v * inv + dither), which can reach
// 128 when the sum rounds up: clamped on the integer, where min / max
// vectorise (a float select would not without -ffast-math).
TANDEM_CPU_INLINE int32_t Code(float v, float inv, bool stochastic, float dither) {
  if (!stochastic) return static_cast<int32_t>(std::nearbyint(v * inv));
  // floor by truncation and a correction: GCC does not vectorise floorf
  // without -fno-trapping-math. |x| < 129, so the int32 is exact.
  const float x = v * inv + dither;
  int32_t q = static_cast<int32_t>(x);
  q -= static_cast<float>(q) > x ? 1 : 0;
  return std::min(q, 127);
}

// Codes of one chunk of m values from v (stochastic: dither index base + i).
TANDEM_CPU_INLINE void QuantizeChunk(const float* __restrict v, int64_t m, float inv,
                                     bool stochastic, uint32_t seed_word, uint32_t base,
                                     int8_t* __restrict q) {
  if (stochastic) {
    for (int64_t i = 0; i < m; ++i) {
      const float d = Dither(seed_word, base + static_cast<uint32_t>(i));
      q[i] = static_cast<int8_t>(Code(v[i], inv, true, d));
    }
  } else {
    for (int64_t i = 0; i < m; ++i) q[i] = static_cast<int8_t>(Code(v[i], inv, false, 0.f));
  }
}

// Codes and new residuals of one chunk in one loop: r holds v on entry.
TANDEM_CPU_INLINE void QuantizeFeedbackChunk(float* __restrict r, int64_t m, float inv,
                                             float scale, bool stochastic, uint32_t seed_word,
                                             uint32_t base, int8_t* __restrict q) {
  if (stochastic) {
    for (int64_t i = 0; i < m; ++i) {
      const float d = Dither(seed_word, base + static_cast<uint32_t>(i));
      const int32_t c = Code(r[i], inv, true, d);
      q[i] = static_cast<int8_t>(c);
      const float e = r[i] - static_cast<float>(c) * scale;
      r[i] = std::fabs(e) <= FLT_MAX ? e : 0.f;
    }
  } else {
    for (int64_t i = 0; i < m; ++i) {
      const int32_t c = Code(r[i], inv, false, 0.f);
      q[i] = static_cast<int8_t>(c);
      const float e = r[i] - static_cast<float>(c) * scale;
      r[i] = std::fabs(e) <= FLT_MAX ? e : 0.f;
    }
  }
}

// r = x + r, returning max |r| (on the bits, as MaxAbs).
TANDEM_CPU_INLINE float AddMaxAbs(const float* __restrict x, float* __restrict r, int64_t m) {
  uint32_t best = 0;
  for (int64_t i = 0; i < m; ++i) {
    const float v = x[i] + r[i];
    r[i] = v;
    uint32_t u;
    std::memcpy(&u, &v, sizeof(u));
    u &= 0x7fffffffu;
    best = best > u ? best : u;
  }
  float f;
  std::memcpy(&f, &best, sizeof(f));
  return f;
}

TANDEM_CPU_INLINE void ChunkScale(float max_abs, float* scale, float* inv) {
  *scale = max_abs / 127.f;
  // Zero chunk: codes 0. Infinite max: inv 0, codes 0, scale inf, so the
  // chunk decodes to NaN (0 * inf) and the loss scaler notices.
  *inv = max_abs > 0.f && max_abs <= FLT_MAX ? 127.f / max_abs : 0.f;
}

TANDEM_CPU_INLINE void Int8EncodeBody(const float* __restrict x, int64_t n, int64_t chunk,
                                      bool stochastic, uint64_t seed, uint8_t* __restrict out) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  int8_t* __restrict q = reinterpret_cast<int8_t*>(out + 4 * chunks);
  const uint32_t sw = SeedWord(seed);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * chunk, m = std::min(chunk, n - lo);
    float scale, inv;
    ChunkScale(MaxAbs(x + lo, m), &scale, &inv);
    std::memcpy(out + 4 * c, &scale, sizeof(scale));
    QuantizeChunk(x + lo, m, inv, stochastic, sw, static_cast<uint32_t>(lo), q + lo);
  }
}
TANDEM_CPU_DISPATCHED(Int8Encode,
                      (const float* __restrict x, int64_t n, int64_t chunk, bool stochastic,
                       uint64_t seed, uint8_t* __restrict out),
                      (x, n, chunk, stochastic, seed, out))

// Per chunk (it stays in L1 between the two loops): v = x + r into r and
// its max; then codes and the new residual r = v - q * scale.
TANDEM_CPU_INLINE void Int8EncodeFeedbackBody(const float* __restrict x, float* __restrict r,
                                              int64_t n, int64_t chunk, bool stochastic,
                                              uint64_t seed, uint8_t* __restrict out) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  int8_t* __restrict q = reinterpret_cast<int8_t*>(out + 4 * chunks);
  const uint32_t sw = SeedWord(seed);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * chunk, m = std::min(chunk, n - lo);
    float scale, inv;
    ChunkScale(AddMaxAbs(x + lo, r + lo, m), &scale, &inv);
    std::memcpy(out + 4 * c, &scale, sizeof(scale));
    QuantizeFeedbackChunk(r + lo, m, inv, scale, stochastic, sw, static_cast<uint32_t>(lo),
                          q + lo);
  }
}
TANDEM_CPU_DISPATCHED(Int8EncodeFeedback,
                      (const float* __restrict x, float* __restrict r, int64_t n, int64_t chunk,
                       bool stochastic, uint64_t seed, uint8_t* __restrict out),
                      (x, r, n, chunk, stochastic, seed, out))

TANDEM_CPU_INLINE void Int8DecodeBody(const uint8_t* __restrict in, int64_t n, int64_t chunk,
                                      bool add, float* __restrict out) {
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int8_t* __restrict q = reinterpret_cast<const int8_t*>(in + 4 * chunks);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lo = c * chunk, m = std::min(chunk, n - lo);
    float scale;
    std::memcpy(&scale, in + 4 * c, sizeof(scale));
    const int8_t* __restrict qc = q + lo;
    float* __restrict oc = out + lo;
    if (add) {
      for (int64_t i = 0; i < m; ++i) oc[i] = oc[i] + static_cast<float>(qc[i]) * scale;
    } else {
      for (int64_t i = 0; i < m; ++i) oc[i] = static_cast<float>(qc[i]) * scale;
    }
  }
}
TANDEM_CPU_DISPATCHED(Int8Decode,
                      (const uint8_t* __restrict in, int64_t n, int64_t chunk, bool add,
                       float* __restrict out),
                      (in, n, chunk, add, out))

class Int8Codec final : public Codec {
 public:
  explicit Int8Codec(const Int8CodecOptions& o)
      : chunk_(o.chunk), stochastic_(o.rounding == Rounding::kStochastic) {
    CHECK(chunk_ > 0) << "int8 codec: chunk must be positive (codec_factory checks it)";
  }
  std::string name() const override { return "int8"; }
  bool sparse() const override { return false; }
  int64_t MaxEncodedBytes(int64_t n) const override { return 4 * ((n + chunk_ - 1) / chunk_) + n; }
  int64_t Encode(const float* x, int64_t n, const EncodeParams& p, uint8_t* out) const override {
    Int8Encode(x, n, chunk_, stochastic_, p.seed, out);
    return MaxEncodedBytes(n);
  }
  int64_t EncodeWithFeedback(const float* x, float* residual, int64_t n, const EncodeParams& p,
                             uint8_t* out) const override {
    Int8EncodeFeedback(x, residual, n, chunk_, stochastic_, p.seed, out);
    return MaxEncodedBytes(n);
  }
  void Decode(const uint8_t* in, int64_t n, float* out) const override {
    Int8Decode(in, n, chunk_, false, out);
  }
  void DecodeAdd(const uint8_t* in, int64_t n, float* out) const override {
    Int8Decode(in, n, chunk_, true, out);
  }

 private:
  const int64_t chunk_;
  const bool stochastic_;
};

}  // namespace

float StochasticDither(uint64_t seed, int64_t i) {
  return Dither(SeedWord(seed), static_cast<uint32_t>(i));
}

std::unique_ptr<Codec> MakeInt8Codec(const Int8CodecOptions& options) {
  return std::make_unique<Int8Codec>(options);
}

}  // namespace codec
}  // namespace tandem
