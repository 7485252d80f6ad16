#include "common/optim/precision.h"

#include "absl/strings/str_cat.h"

namespace tandem {
namespace optim {
namespace {

absl::Status CheckSizes(const char* what, size_t in, size_t out) {
  if (in != out) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": input has ", in, " elements but output has ", out,
        "; size the output like the input"));
  }
  return absl::OkStatus();
}

}  // namespace

fp16_t FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {  // inf or NaN
    if (a == 0x7F800000u) return static_cast<fp16_t>(sign | 0x7C00u);
    return static_cast<fp16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  }
  // 65520 = halfway between 65504 (max half) and 65536: ties to even -> inf.
  if (a >= 0x477FF000u) return static_cast<fp16_t>(sign | 0x7C00u);
  if (a < 0x38800000u) {  // below 2^-14: half subnormal or zero
    const uint32_t e = a >> 23;
    if (e < 102) return static_cast<fp16_t>(sign);  // < 2^-25 (tie -> even 0)
    const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<fp16_t>(sign | h);
  }
  uint32_t h = (a >> 13) - (112u << 10);  // rebias exponent 127 -> 15
  const uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry: ok
  return static_cast<fp16_t>(sign | h);
}

float HalfToFloat(fp16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);
    // Subnormal: normalise into a float (always representable).
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    mant &= 0x3FFu;
    return BitsToFloat(sign | (static_cast<uint32_t>(112 - e) << 23) |
                       (mant << 13));
  }
  if (exp == 31) return BitsToFloat(sign | 0x7F800000u | (mant << 13));
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

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
  for (size_t i = 0; i < in.size(); ++i) out[i] = FloatToHalf(in[i]);
  return absl::OkStatus();
}

absl::Status HalfToFloat(absl::Span<const fp16_t> in, absl::Span<float> out) {
  if (in.size() != out.size()) return CheckSizes("HalfToFloat", in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = HalfToFloat(in[i]);
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

}  // namespace optim
}  // namespace tandem
