// The 16-bit rounding of the compression paths: round to nearest even, overflow to
// infinity, subnormals, NaN kept, and every finite half value round-trips exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "parallel/low_precision.h"

namespace {

using namespace collx::parallel;

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(ParallelLowPrecision, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie: stays even
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie: up to even
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

TEST(ParallelLowPrecision, Float16RangeAndSubnormals) {
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(float_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);      // tie to even: 0
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);      // tie to even: 2
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14)), 0x0400);      // smallest normal
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: stays even
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(ParallelLowPrecision, EveryHalfValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    const float f = fp16_to_float(v);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_fp16(f), v) << std::hex << h;
    const float b = bf16_to_float(v);
    if (!std::isnan(b)) {
      ASSERT_EQ(float_to_bf16(b), v) << std::hex << h;
    }
  }
}

}  // namespace
