// Mixed-precision helpers on the CPU: fp32 <-> bf16 and fp32 <-> fp16
// conversion with round-to-nearest-even, and a finiteness check for loss
// scaling.
//
// The mixed-precision flow tandem uses (fp32 master weights):
//   1. the fp32 master parameters (flat vector) are the only ones the
//      optimizer updates; a bf16/fp16 copy is made for compute with
//      FloatToBf16 / FloatToHalf after every step;
//   2. forward/backward run in low precision (fp16: on loss * scale);
//   3. gradients are widened into the fp32 gradient buffer (Bf16ToFloat /
//      HalfToFloat), checked with HasNonFinite (fp16), and the optimizer is
//      stepped with StepContext::grad_scale = 1 / scale (see loss_scaler.h).
//
// Rounding: nearest, ties to even. Values beyond the format's range become
// +-inf (fp16: |x| >= 65520; bf16: above 3.3961e38 after rounding); fp16
// keeps subnormals (down to 2^-24) and rounds smaller values to signed zero;
// NaN stays NaN (bf16: quietened, sign and high payload kept; fp16: the
// canonical quiet NaN 0x7E00 with the sign kept). Widening is exact.
// Thread-safe: pure functions. Bulk conversions return InvalidArgument if
// the spans' sizes differ.
#ifndef TANDEM_COMMON_NUMERIC_PRECISION_H_
#define TANDEM_COMMON_NUMERIC_PRECISION_H_

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tandem {
namespace numeric {

// Raw bit patterns of the 16-bit formats.
using bf16_t = uint16_t;
using fp16_t = uint16_t;

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline bf16_t FloatToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: keep sign, force quiet bit
    return static_cast<bf16_t>((u >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<bf16_t>((u + rounding_bias) >> 16);
}

inline float Bf16ToFloat(bf16_t h) {
  return BitsToFloat(static_cast<uint32_t>(h) << 16);
}

fp16_t FloatToHalf(float f);
float HalfToFloat(fp16_t h);

absl::Status FloatToBf16(absl::Span<const float> in, absl::Span<bf16_t> out);
absl::Status Bf16ToFloat(absl::Span<const bf16_t> in, absl::Span<float> out);
absl::Status FloatToHalf(absl::Span<const float> in, absl::Span<fp16_t> out);
absl::Status HalfToFloat(absl::Span<const fp16_t> in, absl::Span<float> out);

// True if any element is +-inf or NaN. For a sharded check, each rank tests
// its range and the flags are OR-reduced (allreduce max) before
// DynamicLossScaler::Update().
bool HasNonFinite(absl::Span<const float> values);

}  // namespace numeric
}  // namespace tandem

#endif  // TANDEM_COMMON_NUMERIC_PRECISION_H_
