// Inline, branch-free conversions between float32 and the 16-bit float formats (IEEE
// binary16 "half" and bfloat16). They are header-inline so the reduction loops can inline
// them and the compiler can vectorize the whole loop: every step is a 32-bit integer or
// float lane operation, and the special cases are selects rather than branches, which
// compile to compare-and-blend with plain SSE2. The out-of-line versions in datatype.h
// (half_to_float etc.) are thin wrappers around these.
//
// Rounding is to nearest, ties to even (float_to_half's subnormal step relies on the FPU
// being in its default round-to-nearest mode). NaN stays NaN with its sign: widening copies
// the payload bit for bit; narrowing keeps the top payload bits and sets the quiet bit
// (dropping the low payload bits could otherwise turn a NaN into an infinity).
#pragma once

#include <cstdint>
#include <cstring>

namespace collx {
namespace half_detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// condition ? if_true : if_false, as mask arithmetic. A ?: would let the compiler move a
// float operation feeding only one side into a branch, and it then will not speculate it
// back out (floating point may trap under the default -ftrapping-math), which stops the
// loop from vectorizing. Written this way every operand is always computed.
inline uint32_t select_bits(bool condition, uint32_t if_true, uint32_t if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

// binary16 -> float32. Exact for every input (float32 holds every half value).
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  // Signed lanes: the magnitude is below 0x8000, and signed compares are what SSE2 has.
  const int32_t magnitude = h & 0x7fff;
  // Normal numbers: move exponent and mantissa into place and rebias 15 -> 127.
  const uint32_t normal = (static_cast<uint32_t>(magnitude) << 13) + (112u << 23);
  // Infinity/NaN (exponent 31): rebias to 255 instead; the payload is copied bit for bit,
  // with no float arithmetic that could touch it.
  const uint32_t inf_or_nan = normal + (112u << 23);
  // Zero and subnormals (exponent 0): the value is magnitude * 2^-24, computed exactly by an
  // integer-to-float conversion and a power-of-two scale.
  const uint32_t subnormal = float_bits(static_cast<float>(magnitude) * 0x1p-24f);
  uint32_t bits = select_bits(magnitude < 0x0400, subnormal, normal);
  bits = select_bits(magnitude >= 0x7c00, inf_or_nan, bits);
  return float_from_bits(sign | bits);
}

// float32 -> binary16, round to nearest even; overflow gives infinity.
inline uint16_t float_to_half_bits(float f) {
  const uint32_t w = float_bits(f);
  const uint32_t sign = (w >> 16) & 0x8000u;
  const int32_t magnitude = static_cast<int32_t>(w & 0x7fffffffu);  // non-negative
  const uint32_t m = static_cast<uint32_t>(magnitude);

  // Normal half range [2^-14, 65520): rebias 127 -> 15, then round the 13 dropped bits to
  // nearest even by adding 0x0fff plus the lowest kept bit. A carry out of the mantissa
  // correctly bumps the exponent (up to 0x7bff + 1 ulp would be 65520, excluded below).
  const uint32_t rebased = m - (112u << 23);
  const uint32_t normal = (rebased + 0x0fffu + ((rebased >> 13) & 1u)) >> 13;

  // Subnormal half range [0, 2^-14): adding 0.5 puts the value into a binade whose float32
  // ulp is 2^-24 (the half subnormal step), so the hardware addition does the round to
  // nearest even; subtracting 0.5's bits leaves the half mantissa (0x400 when it rounds up
  // to the smallest normal, which is exactly the right encoding).
  const uint32_t subnormal =
      float_bits(float_from_bits(m) + 0.5f) - float_bits(0.5f);

  // NaN: keep the top 10 payload bits and force the quiet bit (the first of them) on.
  const uint32_t nan = 0x7e00u | ((m >> 13) & 0x03ffu);

  uint32_t bits = select_bits(magnitude < 0x38800000, subnormal, normal);  // 2^-14
  bits = select_bits(magnitude >= 0x477ff000, 0x7c00u, bits);                // 65520
  bits = select_bits(magnitude > 0x7f800000, nan, bits);
  return static_cast<uint16_t>(sign | bits);
}

// bfloat16 -> float32: bfloat16 is the top half of a float32.
inline float bfloat16_bits_to_float(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// float32 -> bfloat16, round to nearest even; overflow gives infinity.
inline uint16_t float_to_bfloat16_bits(float f) {
  const uint32_t w = float_bits(f);
  // Adding 0x7fff plus the lowest kept bit rounds the dropped 16 bits to nearest even; the
  // carry propagates into the exponent, so the largest finite values round up to infinity.
  // A NaN is not rounded (its carry could reach the sign) but truncated with the quiet bit
  // set, so a payload only in the dropped bits cannot turn it into an infinity. Everything
  // stays in 32-bit lanes until the one final narrowing, which vectorizes best.
  const uint32_t nan_mask = 0u - static_cast<uint32_t>(static_cast<int32_t>(w & 0x7fffffffu) > 0x7f800000);
  const uint32_t rounding = (0x7fffu + ((w >> 16) & 1u)) & ~nan_mask;
  const uint32_t quieted = w | (nan_mask & 0x00400000u);
  return static_cast<uint16_t>((quieted + rounding) >> 16);
}

}  // namespace half_detail
}  // namespace collx
