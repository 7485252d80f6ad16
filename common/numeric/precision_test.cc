#include "common/numeric/precision.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace numeric {
namespace {

bool IsNanBits16(uint16_t h, int exp_bits) {
  const uint16_t exp_mask = exp_bits == 5 ? 0x7C00 : 0x7F80;
  return (h & exp_mask) == exp_mask && (h & ~exp_mask & 0x7FFF) != 0;
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x3F818000u)), 0x3F82);  // tie -> even
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x3F808001u)), 0x3F81);  // above tie
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x3F807FFFu)), 0x3F80);  // below tie
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // -> inf
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(FloatToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_TRUE(IsNanBits16(FloatToBf16(std::nanf("")), 8));
  // A NaN whose payload sits only in the low 16 bits must stay NaN.
  EXPECT_TRUE(IsNanBits16(FloatToBf16(BitsToFloat(0x7F800001u)), 8));
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x00000001u)), 0x0000);  // tiny subnormal
}

TEST(Bf16Test, EveryBf16RoundTripsExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Bf16ToFloat(static_cast<bf16_t>(h));
    if (IsNanBits16(static_cast<uint16_t>(h), 8)) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_TRUE(IsNanBits16(FloatToBf16(f), 8));
    } else {
      ASSERT_EQ(FloatToBf16(f), h) << std::hex << h;
    }
  }
}

TEST(Fp16Test, EveryHalfRoundTripsAndMatchesCompilerConversion) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<fp16_t>(h));
    _Float16 ref;
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&ref, &bits, 2);
    if (IsNanBits16(bits, 5)) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_TRUE(IsNanBits16(FloatToHalf(f), 5));
      continue;
    }
    ASSERT_EQ(FloatBits(f), FloatBits(static_cast<float>(ref))) << std::hex << h;
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

// GCC's _Float16 conversion (libgcc, round to nearest even) as reference on
// random bit patterns spanning every exponent.
TEST(Fp16Test, MatchesCompilerConversionOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const float f = BitsToFloat(rng());
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(FloatToHalf(f), ref_bits) << std::hexfloat << f;
  }
  // And densely around the half range's edges.
  for (float base : {65504.0f, 6.103515625e-05f /*2^-14*/,
                     5.9604644775390625e-08f /*2^-24*/}) {
    uint32_t u = FloatBits(base);
    for (uint32_t d = 0; d < 20000; ++d) {
      for (uint32_t v : {u + d, u - d}) {
        const float f = BitsToFloat(v);
        const _Float16 ref = static_cast<_Float16>(f);
        uint16_t ref_bits;
        std::memcpy(&ref_bits, &ref, 2);
        ASSERT_EQ(FloatToHalf(f), ref_bits) << std::hexfloat << f;
      }
    }
  }
}

TEST(Fp16Test, RoundingEdgeCases) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);               // max half
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7BFF);              // below the tie
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);               // tie -> even = inf
  EXPECT_EQ(FloatToHalf(-1e6f), 0xFC00);                  // overflow -> -inf
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // min subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0001f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp -> 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // min normal
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(-1e-10f), 0x8000);  // underflow keeps the sign
  EXPECT_TRUE(IsNanBits16(FloatToHalf(std::nanf("")), 5));
  EXPECT_TRUE(IsNanBits16(FloatToHalf(BitsToFloat(0x7F800001u)), 5));
  EXPECT_FLOAT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_FLOAT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

TEST(PrecisionTest, BulkConversionsAndSizeCheck) {
  const std::vector<float> in = {0.1f, -3.5f, 1e-3f, 70000.0f};
  std::vector<fp16_t> h(4);
  std::vector<bf16_t> b(4);
  std::vector<float> back(4);
  ASSERT_TRUE(FloatToHalf(in, absl::MakeSpan(h)).ok());
  ASSERT_TRUE(HalfToFloat(h, absl::MakeSpan(back)).ok());
  EXPECT_NEAR(back[0], 0.1f, 1e-4f);
  EXPECT_EQ(back[1], -3.5f);
  EXPECT_TRUE(std::isinf(back[3]));
  ASSERT_TRUE(FloatToBf16(in, absl::MakeSpan(b)).ok());
  ASSERT_TRUE(Bf16ToFloat(b, absl::MakeSpan(back)).ok());
  EXPECT_NEAR(back[0], 0.1f, 1e-3f);
  EXPECT_NEAR(back[3], 70000.0f, 300.0f);  // bf16 keeps fp32's range
  std::vector<fp16_t> small(3);
  auto st = FloatToHalf(in, absl::MakeSpan(small));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Bf16ToFloat(b, absl::MakeSpan(back).subspan(1)).ok());
}

TEST(PrecisionTest, HasNonFiniteFindsInfAndNanAnywhere) {
  std::vector<float> v(1001, 1.0f);
  EXPECT_FALSE(HasNonFinite(v));
  v[500] = std::numeric_limits<float>::max();
  EXPECT_FALSE(HasNonFinite(v));
  EXPECT_FALSE(HasNonFinite({}));
  for (size_t pos : {size_t{0}, size_t{7}, size_t{1000}}) {
    for (float bad : {std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), std::nanf("")}) {
      std::vector<float> w = v;
      w[pos] = bad;
      EXPECT_TRUE(HasNonFinite(w)) << pos;
    }
  }
}

}  // namespace
}  // namespace numeric
}  // namespace tandem
