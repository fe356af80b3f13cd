// float16/bfloat16 <-> float32/double conversions: exhaustive over every 16-bit pattern,
// against the reference in reference_for_tests.h, and on hand-made rounding cases whose
// expected encodings are written out literally.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "lib/dtype/datatype.h"
#include "lib/dtype/reference_for_tests.h"

namespace collx {
namespace {

using reference::bits_of;
using reference::float_of;
using reference::kBFloat16;
using reference::kHalf;

TEST(HalfToFloat, EveryBitPatternMatchesTheReferenceValue) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = half_to_float(h);
    if (reference::is_nan(kHalf, h)) {
      // NaN keeps its sign and its payload, bit for bit (no quieting on widening).
      const uint32_t expected = ((b & 0x8000u) << 16) | 0x7f800000u | ((b & 0x3ffu) << 13);
      ASSERT_EQ(bits_of(f), expected) << std::hex << b;
    } else {
      const double expected = reference::decode(kHalf, h);
      ASSERT_EQ(static_cast<double>(f), expected) << std::hex << b;
      ASSERT_EQ(std::signbit(f), std::signbit(expected)) << std::hex << b;
    }
  }
}

TEST(BFloat16ToFloat, EveryBitPatternIsTheTopHalfOfAFloat) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    ASSERT_EQ(bits_of(bfloat16_to_float(static_cast<uint16_t>(b))), b << 16) << std::hex << b;
  }
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0xc000), -2.0f);
}

TEST(HalfRoundTrip, EveryNonNanPatternSurvivesAndNanStaysNan) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const uint16_t back = float_to_half(half_to_float(h));
    if (reference::is_nan(kHalf, h)) {
      ASSERT_TRUE(reference::is_nan(kHalf, back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << b;
    } else {
      ASSERT_EQ(back, h) << std::hex << b;
    }
  }
}

TEST(BFloat16RoundTrip, EveryNonNanPatternSurvivesAndNanStaysNan) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const uint16_t back = float_to_bfloat16(bfloat16_to_float(h));
    if (reference::is_nan(kBFloat16, h)) {
      ASSERT_TRUE(reference::is_nan(kBFloat16, back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << b;
    } else {
      ASSERT_EQ(back, h) << std::hex << b;
    }
  }
}

// Checks float -> 16-bit conversion of f against the reference (f must not be NaN).
void expect_matches_reference(reference::SmallFloatFormat format, uint16_t (*convert)(float), float f) {
  ASSERT_EQ(convert(f), reference::encode(format, static_cast<double>(f)))
      << "float bits " << std::hex << bits_of(f);
}

// Around every representable 16-bit value: the midpoint to its upper neighbour (a tie, exact
// in float32), one float ulp either side of it, and the value itself.
void check_neighbourhoods(reference::SmallFloatFormat format, uint16_t (*convert)(float)) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const uint16_t next = static_cast<uint16_t>(b + 1);
    if (reference::is_nan(format, h)) continue;
    const double value = reference::decode(format, h);
    if (std::isinf(value)) continue;
    expect_matches_reference(format, convert, static_cast<float>(value));
    if ((next & 0x7fff) == 0) continue;  // 0xffff + 1 wrapped around
    // Above the largest finite value the "next" value is 2^(emax+1), so the midpoint there
    // is the overflow threshold.
    double upper = reference::decode(format, next);
    if (std::isinf(upper)) upper = std::copysign(std::ldexp(1.0, format.bias() + 1), value);
    const float midpoint = static_cast<float>((value + upper) / 2);
    ASSERT_EQ(static_cast<double>(midpoint), (value + upper) / 2) << "midpoint must be exact";
    expect_matches_reference(format, convert, midpoint);
    expect_matches_reference(format, convert, std::nextafter(midpoint, 0.0f));
    expect_matches_reference(format, convert, std::nextafter(midpoint, 2 * midpoint));
  }
}

TEST(FloatToHalf, MatchesReferenceAroundEveryHalfValueAndItsTies) {
  check_neighbourhoods(kHalf, float_to_half);
}

TEST(FloatToBFloat16, MatchesReferenceAroundEveryBFloat16ValueAndItsTies) {
  check_neighbourhoods(kBFloat16, float_to_bfloat16);
}

// A sample spread over all 2^32 float patterns (stride co-prime with the format fields).
TEST(FloatToHalf, MatchesReferenceAcrossAllFloatBitPatterns) {
  for (uint64_t u = 0; u <= 0xffffffffu; u += 257) {
    const float f = float_of(static_cast<uint32_t>(u));
    if (std::isnan(f)) {
      ASSERT_TRUE(reference::is_nan(kHalf, float_to_half(f))) << std::hex << u;
      continue;
    }
    expect_matches_reference(kHalf, float_to_half, f);
  }
}

TEST(FloatToBFloat16, MatchesReferenceAcrossAllFloatBitPatterns) {
  for (uint64_t u = 0; u <= 0xffffffffu; u += 257) {
    const float f = float_of(static_cast<uint32_t>(u));
    if (std::isnan(f)) {
      ASSERT_TRUE(reference::is_nan(kBFloat16, float_to_bfloat16(f))) << std::hex << u;
      continue;
    }
    expect_matches_reference(kBFloat16, float_to_bfloat16, f);
  }
}

TEST(FloatToHalf, RoundsTiesToEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);             // tie, 1.0 is even
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above the tie
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie, 0x3c02 is even
  EXPECT_EQ(float_to_half(-1.0f - 3 * 0x1p-11f), 0xbc02);
  EXPECT_EQ(float_to_half(2047.0f + 0.5f), 0x67ff + 1);          // carries into the exponent
}

TEST(FloatToHalf, OverflowsToInfinityAtTheRoundingBoundary) {
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);                     // largest finite half
  EXPECT_EQ(float_to_half(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // the tie rounds to the "even" infinity
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(FloatToHalf, HandlesSubnormalsAndSignedZero) {
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);                         // smallest subnormal
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);                         // tie down to even zero
  EXPECT_EQ(float_to_half(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);                     // tie up to even 2
  EXPECT_EQ(float_to_half(0x1p-14f - 0x1p-25f), 0x0400);  // tie between largest subnormal and 2^-14
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);                         // smallest normal
  EXPECT_EQ(float_to_half(-0x1p-24f), 0x8001);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1e-10f), 0x0000);
  EXPECT_EQ(float_to_half(-1e-10f), 0x8000);
  EXPECT_EQ(float_to_half(0x1p-149f), 0x0000);  // float subnormal input
}

TEST(FloatToHalf, KeepsNanANanEvenWhenThePayloadIsInTheDroppedBits) {
  EXPECT_TRUE(reference::is_nan(kHalf, float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(float_to_half(float_of(0x7f800001u)), 0x7e00);  // would truncate to infinity
  EXPECT_EQ(float_to_half(float_of(0xff800001u)), 0xfe00);
  EXPECT_EQ(float_to_half(float_of(0x7fa00000u)), 0x7f00);  // top payload bits are kept
}

TEST(FloatToBFloat16, RoundsTiesToEvenAndOverflowsToInfinity) {
  EXPECT_EQ(float_to_bfloat16(float_of(0x3f808000u)), 0x3f80);  // tie, even
  EXPECT_EQ(float_to_bfloat16(float_of(0x3f818000u)), 0x3f82);  // tie, even
  EXPECT_EQ(float_to_bfloat16(float_of(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bfloat16(float_of(0x3f807fffu)), 0x3f80);  // below the tie
  EXPECT_EQ(float_to_bfloat16(float_of(0x7f7f7fffu)), 0x7f7f);  // largest finite stays
  EXPECT_EQ(float_to_bfloat16(float_of(0x7f7f8000u)), 0x7f80);  // tie rounds to infinity
  EXPECT_EQ(float_to_bfloat16(float_of(0xff7f8000u)), 0xff80);
  EXPECT_EQ(float_to_bfloat16(float_of(0x00008000u)), 0x0000);  // subnormal tie, even
  EXPECT_EQ(float_to_bfloat16(float_of(0x00018000u)), 0x0002);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
}

TEST(FloatToBFloat16, KeepsNanANanEvenWhenThePayloadIsInTheDroppedBits) {
  EXPECT_EQ(float_to_bfloat16(float_of(0x7f800001u)), 0x7fc0);  // would round to infinity
  EXPECT_EQ(float_to_bfloat16(float_of(0xff800001u)), 0xffc0);
  EXPECT_EQ(float_to_bfloat16(float_of(0x7fffffffu)), 0x7fff);  // would wrap to zero
  EXPECT_EQ(float_to_bfloat16(float_of(0x7fa00000u)), 0x7fe0);  // quieted, payload kept
}

TEST(DoubleToHalf, RoundsOnceNotViaFloat) {
  // Rounding to float first would give exactly the tie 1 + 2^-11, which then goes to even.
  EXPECT_EQ(double_to_half(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
  EXPECT_EQ(double_to_half(1.0 + 0x1p-11 - 0x1p-40), 0x3c00);
  EXPECT_EQ(double_to_half(1.0 + 0x1p-11), 0x3c00);
  EXPECT_EQ(double_to_half(0x1p-25 + 0x1p-60), 0x0001);
  EXPECT_EQ(double_to_half(1e300), 0x7c00);
  EXPECT_EQ(double_to_half(-1e300), 0xfc00);
  EXPECT_EQ(double_to_half(1e-300), 0x0000);
  EXPECT_TRUE(reference::is_nan(kHalf, double_to_half(std::nan(""))));
}

TEST(DoubleToBFloat16, RoundsOnceNotViaFloat) {
  EXPECT_EQ(double_to_bfloat16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
  EXPECT_EQ(double_to_bfloat16(1.0 + 0x1p-8), 0x3f80);
  EXPECT_EQ(double_to_bfloat16(1e300), 0x7f80);
  EXPECT_EQ(double_to_bfloat16(-1e300), 0xff80);
  EXPECT_EQ(double_to_bfloat16(0x1p-134 + 0x1p-180), 0x0001);  // just above the subnormal tie
  EXPECT_TRUE(reference::is_nan(kBFloat16, double_to_bfloat16(std::nan(""))));
}

TEST(DoubleToHalfAndBFloat16, MatchTheReferenceOnRandomDoubles) {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int> exponent(-160, 140);
  std::uniform_real_distribution<double> significand(1.0, 2.0);
  for (int i = 0; i < 200000; ++i) {
    double d = std::ldexp(significand(rng), exponent(rng));
    if (i % 2) d = -d;
    ASSERT_EQ(double_to_half(d), reference::encode(kHalf, d)) << d;
    ASSERT_EQ(double_to_bfloat16(d), reference::encode(kBFloat16, d)) << d;
  }
}

// Doubles a hair away from a tie of the 16-bit format, where rounding through float32
// would go wrong: the float32 rounding erases the hair.
TEST(DoubleToHalfAndBFloat16, MatchTheReferenceJustAroundTies) {
  std::mt19937_64 rng(777);
  std::uniform_int_distribution<uint32_t> pattern(0, 0x7bfe);  // finite halves with a finite next
  std::uniform_int_distribution<int> hair_exponent(-52, -12);
  for (int i = 0; i < 200000; ++i) {
    const uint16_t h = static_cast<uint16_t>(pattern(rng));
    const double midpoint = (reference::decode(kHalf, h) + reference::decode(kHalf, h + 1)) / 2;
    const double hair = std::ldexp(midpoint, hair_exponent(rng));
    for (double d : {midpoint, midpoint + hair, midpoint - hair, -midpoint - hair}) {
      ASSERT_EQ(double_to_half(d), reference::encode(kHalf, d)) << d;
      ASSERT_EQ(double_to_bfloat16(d), reference::encode(kBFloat16, d)) << d;
    }
  }
}

}  // namespace
}  // namespace collx
