#include "common/codec/fp16_codec.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include <immintrin.h>

#include "common/numeric/cpu_dispatch.h"

namespace tandem {
namespace codec {
namespace {

TANDEM_CPU_INLINE uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
TANDEM_CPU_INLINE float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The branch-free conversions of common/numeric/precision.cc (private there),
// repeated so they inline into the fused loops below; fp16_codec_test
// checks them bit for bit against numeric::FloatToHalf / HalfToFloat.
TANDEM_CPU_INLINE uint16_t ToHalf(float f) {
  const uint32_t u = Bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t big = 0x7C00u | (static_cast<uint32_t>(a > 0x7F800000u) << 9);
  const uint32_t sub = Bits(FromBits(a) + 0.5f) - 0x3F000000u;
  const uint32_t odd = (a >> 13) & 1u;
  const uint32_t norm = (a + 0xC8000FFFu + odd) >> 13;
  const uint32_t is_big = 0u - static_cast<uint32_t>(a >= 0x47800000u);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(a < 0x38800000u);
  const uint32_t h = (big & is_big) | (sub & is_sub & ~is_big) | (norm & ~is_sub & ~is_big);
  return static_cast<uint16_t>(sign | h);
}

TANDEM_CPU_INLINE float FromHalf(uint16_t h) {
  const uint32_t x = h;
  const uint32_t sign = (x & 0x8000u) << 16;
  const uint32_t exp = (x >> 10) & 0x1Fu;
  const uint32_t mant = x & 0x3FFu;
  const uint32_t normal = ((exp + 112u) << 23) | (mant << 13);
  const uint32_t special = 0x7F800000u | (mant << 13);
  const uint32_t sub =
      Bits(static_cast<float>(static_cast<int32_t>(mant)) * 5.9604644775390625e-08f);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(exp == 0);
  const uint32_t is_special = 0u - static_cast<uint32_t>(exp == 31);
  return FromBits(sign | (sub & is_sub) | (special & is_special) |
                  (normal & ~is_sub & ~is_special));
}

// Saturates finite |f| > 65504 to 65504 (the largest half) on the bits,
// keeping inf and NaN: integer masks vectorise where a float select would
// not without -ffast-math.
TANDEM_CPU_INLINE float Saturate(float f) {
  const uint32_t u = Bits(f);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t over =
      0u - static_cast<uint32_t>((a > 0x477FE000u) & (a < 0x7F800000u));  // 65504 < |f| < inf
  return FromBits((u & ~over) | (((u & 0x80000000u) | 0x477FE000u) & over));
}

TANDEM_CPU_INLINE void Fp16EncodeBody(const float* __restrict x, int64_t n,
                                      uint16_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = ToHalf(Saturate(x[i]));
}
TANDEM_CPU_DISPATCHED(Fp16Encode, (const float* __restrict x, int64_t n, uint16_t* __restrict out),
                      (x, n, out))

TANDEM_CPU_INLINE void Fp16EncodeFeedbackBody(const float* __restrict x, float* __restrict r,
                                              int64_t n, uint16_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] + r[i];
    const uint16_t h = ToHalf(Saturate(v));
    out[i] = h;
    const float d = v - FromHalf(h);
    r[i] = std::fabs(d) <= FLT_MAX ? d : 0.f;
  }
}
TANDEM_CPU_DISPATCHED(Fp16EncodeFeedback,
                      (const float* __restrict x, float* __restrict r, int64_t n,
                       uint16_t* __restrict out),
                      (x, r, n, out))

TANDEM_CPU_INLINE void Fp16DecodeBody(const uint16_t* __restrict in, int64_t n, bool add,
                                      float* __restrict out) {
  if (add) {
    for (int64_t i = 0; i < n; ++i) out[i] = out[i] + FromHalf(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = FromHalf(in[i]);
  }
}
TANDEM_CPU_DISPATCHED(Fp16Decode,
                      (const uint16_t* __restrict in, int64_t n, bool add, float* __restrict out),
                      (in, n, add, out))

// Hardware conversion (F16C, on every AVX2 server CPU): the same bits as
// ToHalf / FromHalf for every non-NaN value (round to nearest even,
// subnormals kept); a NaN stays a NaN, with its payload rather than the
// canonical one. Encodings are decoded by every rank from the same bytes,
// so a sender's choice of path never makes ranks disagree.
bool CpuHasF16c() {
  static const bool f16c = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
  return f16c && numeric::CpuHasAvx2Fma();  // honours ForceBaselineVectorWidth
}

__attribute__((target("avx2,f16c"))) inline __m256 SaturateVec(__m256 v) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256 a = _mm256_andnot_ps(sign, v);
  const __m256 over = _mm256_and_ps(_mm256_cmp_ps(a, _mm256_set1_ps(65504.f), _CMP_GT_OQ),
                                    _mm256_cmp_ps(a, _mm256_set1_ps(INFINITY), _CMP_LT_OQ));
  const __m256 lim = _mm256_or_ps(_mm256_and_ps(sign, v), _mm256_set1_ps(65504.f));
  return _mm256_blendv_ps(v, lim, over);
}

__attribute__((target("avx2,f16c"))) void Fp16EncodeF16c(const float* x, int64_t n,
                                                        uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = SaturateVec(_mm256_loadu_ps(x + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) out[i] = ToHalf(Saturate(x[i]));
}

__attribute__((target("avx2,f16c"))) void Fp16EncodeFeedbackF16c(const float* x, float* r,
                                                                int64_t n, uint16_t* out) {
  int64_t i = 0;
  const __m256 max = _mm256_set1_ps(FLT_MAX);
  const __m256 sign = _mm256_set1_ps(-0.f);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(r + i));
    const __m128i h = _mm256_cvtps_ph(SaturateVec(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    const __m256 e = _mm256_sub_ps(v, _mm256_cvtph_ps(h));
    const __m256 finite = _mm256_cmp_ps(_mm256_andnot_ps(sign, e), max, _CMP_LE_OQ);
    _mm256_storeu_ps(r + i, _mm256_and_ps(e, finite));
  }
  for (; i < n; ++i) {
    const float v = x[i] + r[i];
    const uint16_t h = ToHalf(Saturate(v));
    out[i] = h;
    const float d = v - FromHalf(h);
    r[i] = std::fabs(d) <= FLT_MAX ? d : 0.f;
  }
}

__attribute__((target("avx2,f16c"))) void Fp16DecodeF16c(const uint16_t* in, int64_t n, bool add,
                                                        float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    if (add) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) out[i] = add ? out[i] + FromHalf(in[i]) : FromHalf(in[i]);
}

// Blocks are byte strings; the 2-byte loads and stores below assume the
// caller's block is 2-aligned (the strategy's blocks are 8-aligned).
class Fp16Codec final : public Codec {
 public:
  std::string name() const override { return "fp16"; }
  bool sparse() const override { return false; }
  int64_t MaxEncodedBytes(int64_t n) const override { return 2 * n; }
  int64_t Encode(const float* x, int64_t n, const EncodeParams&, uint8_t* out) const override {
    uint16_t* h = reinterpret_cast<uint16_t*>(out);
    CpuHasF16c() ? Fp16EncodeF16c(x, n, h) : Fp16Encode(x, n, h);
    return 2 * n;
  }
  int64_t EncodeWithFeedback(const float* x, float* residual, int64_t n, const EncodeParams&,
                             uint8_t* out) const override {
    uint16_t* h = reinterpret_cast<uint16_t*>(out);
    CpuHasF16c() ? Fp16EncodeFeedbackF16c(x, residual, n, h) : Fp16EncodeFeedback(x, residual, n, h);
    return 2 * n;
  }
  void Decode(const uint8_t* in, int64_t n, float* out) const override {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    CpuHasF16c() ? Fp16DecodeF16c(h, n, false, out) : Fp16Decode(h, n, false, out);
  }
  void DecodeAdd(const uint8_t* in, int64_t n, float* out) const override {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
    CpuHasF16c() ? Fp16DecodeF16c(h, n, true, out) : Fp16Decode(h, n, true, out);
  }
};

}  // namespace

std::unique_ptr<Codec> MakeFp16Codec() { return std::make_unique<Fp16Codec>(); }

}  // namespace codec
}  // namespace tandem
