#include "common/numeric/precision.h"

#include "absl/strings/str_cat.h"

namespace tandem {
namespace numeric {
namespace {

absl::Status CheckSizes(const char* what, size_t in, size_t out) {
  if (in != out) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": input has ", in, " elements but output has ", out,
        "; size the output like the input"));
  }
  return absl::OkStatus();
}

// Internal (not interposable under -fPIC) so the bulk loops inline and
// vectorise them.
inline fp16_t FloatToHalfImpl(float f) {
  // Branch-free, so the bulk loop vectorises: all three candidates are
  // computed and one is selected. Rounding is done by fp32 arithmetic in the
  // default round-to-nearest-even mode (the technique of F. Giesen's
  // float_to_half_fast3_rtne); tested against the compiler's _Float16.
  const uint32_t u = FloatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  // |f| >= 65536 (or inf/NaN): inf, or a quiet NaN.
  const uint32_t big = 0x7C00u | (static_cast<uint32_t>(a > 0x7F800000u) << 9);
  // |f| < 2^-14: adding 0.5 (ulp 2^-24, the half subnormal step) rounds to
  // the nearest subnormal, ties to even; the low bits are then the result.
  const uint32_t sub = FloatBits(BitsToFloat(a) + 0.5f) - 0x3F000000u;
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to
  // nearest even; a carry may roll into the exponent (up to inf), correctly.
  const uint32_t odd = (a >> 13) & 1u;
  const uint32_t norm = (a + 0xC8000FFFu + odd) >> 13;  // + ((15-127)<<23)
  // Selection by masks rather than ?: so GCC if-converts and vectorises.
  const uint32_t is_big = 0u - static_cast<uint32_t>(a >= 0x47800000u);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(a < 0x38800000u);
  const uint32_t h = (big & is_big) | (sub & is_sub & ~is_big) |
                     (norm & ~is_sub & ~is_big);
  return static_cast<fp16_t>(sign | h);
}

inline float HalfToFloatImpl(fp16_t h) {
  // Branch-free (vectorises): subnormals are mant * 2^-24, exact in fp32.
  const uint32_t x = h;
  const uint32_t sign = (x & 0x8000u) << 16;
  const uint32_t exp = (x >> 10) & 0x1Fu;
  const uint32_t mant = x & 0x3FFu;
  const uint32_t normal = ((exp + 112u) << 23) | (mant << 13);
  const uint32_t special = 0x7F800000u | (mant << 13);  // inf / NaN
  const uint32_t sub =
      FloatBits(static_cast<float>(static_cast<int32_t>(mant)) * 5.9604644775390625e-08f);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(exp == 0);
  const uint32_t is_special = 0u - static_cast<uint32_t>(exp == 31);
  return BitsToFloat(sign | (sub & is_sub) | (special & is_special) |
                     (normal & ~is_sub & ~is_special));
}

}  // namespace

fp16_t FloatToHalf(float f) { return FloatToHalfImpl(f); }
float HalfToFloat(fp16_t h) { return HalfToFloatImpl(h); }

absl::Status FloatToBf16(absl::Span<const float> in, absl::Span<bf16_t> out) {
  if (in.size() != out.size()) return CheckSizes("FloatToBf16", in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = FloatToBf16(in[i]);
  return absl::OkStatus();
}

absl::Status Bf16ToFloat(absl::Span<const bf16_t> in, absl::Span<float> out) {
  if (in.size() != out.size()) return CheckSizes("Bf16ToFloat", in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = Bf16ToFloat(in[i]);
  return absl::OkStatus();
}

absl::Status FloatToHalf(absl::Span<const float> in, absl::Span<fp16_t> out) {
  if (in.size() != out.size()) return CheckSizes("FloatToHalf", in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = FloatToHalfImpl(in[i]);
  return absl::OkStatus();
}

absl::Status HalfToFloat(absl::Span<const fp16_t> in, absl::Span<float> out) {
  if (in.size() != out.size()) return CheckSizes("HalfToFloat", in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = HalfToFloatImpl(in[i]);
  return absl::OkStatus();
}

bool HasNonFinite(absl::Span<const float> values) {
  // Branch-free OR over the exponent test so the loop vectorises.
  uint32_t any = 0;
  const float* v = values.data();
  const size_t n = values.size();
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], sizeof(u));
    any |= static_cast<uint32_t>((u & 0x7F800000u) == 0x7F800000u);
  }
  return any != 0;
}

}  // namespace numeric
}  // namespace tandem
