// Test-only reference arithmetic for the dtype tests: slow, obviously correct versions of
// the 16-bit float formats (built on ldexp/frexp/nearbyint in double, sharing no code with
// the bit-twiddling under test) and exact references for the other types. Not part of the
// library; included only by lib/dtype/*_test.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace collx {
namespace reference {

// A binary floating-point format with 1 sign bit, exponent_bits and mantissa_bits.
struct SmallFloatFormat {
  int exponent_bits;
  int mantissa_bits;

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  int min_normal_exponent() const { return 1 - bias(); }
  uint32_t exponent_all_ones() const { return (1u << exponent_bits) - 1; }
  uint32_t mantissa_mask() const { return (1u << mantissa_bits) - 1; }
  uint32_t sign_bit() const { return 1u << (exponent_bits + mantissa_bits); }
};

constexpr SmallFloatFormat kHalf{5, 10};
constexpr SmallFloatFormat kBFloat16{8, 7};

inline bool is_nan(SmallFloatFormat format, uint16_t bits) {
  const uint32_t exponent = (bits >> format.mantissa_bits) & format.exponent_all_ones();
  return exponent == format.exponent_all_ones() && (bits & format.mantissa_mask()) != 0;
}

// The exact value of an encoding (every value of both formats is a double).
inline double decode(SmallFloatFormat format, uint16_t bits) {
  const bool negative = (bits & format.sign_bit()) != 0;
  const uint32_t exponent = (bits >> format.mantissa_bits) & format.exponent_all_ones();
  const uint32_t mantissa = bits & format.mantissa_mask();
  double magnitude;
  if (exponent == format.exponent_all_ones()) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa),
                           format.min_normal_exponent() - format.mantissa_bits);
  } else {
    const double significand = static_cast<double>((1u << format.mantissa_bits) | mantissa);
    magnitude = std::ldexp(significand, static_cast<int>(exponent) - format.bias() - format.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

// The encoding of a double rounded to nearest, ties to even (the double itself is not
// rounded first). value must not be NaN.
inline uint16_t encode(SmallFloatFormat format, double value) {
  const uint32_t sign = std::signbit(value) ? format.sign_bit() : 0;
  const uint32_t infinity = sign | (format.exponent_all_ones() << format.mantissa_bits);
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return static_cast<uint16_t>(infinity);

  // The exponent of the last mantissa bit at this magnitude (fixed below the normal range).
  const int min_exponent = format.min_normal_exponent();
  int exponent = min_exponent;
  if (magnitude >= std::ldexp(1.0, min_exponent)) {
    int frexp_exponent;
    std::frexp(magnitude, &frexp_exponent);  // magnitude = m * 2^e with m in [0.5, 1)
    exponent = frexp_exponent - 1;
  }
  const int quantum_exponent = exponent - format.mantissa_bits;
  // The scaling is exact (a power of two); nearbyint rounds ties to even in the default
  // rounding mode, which the tests never change.
  const double steps = std::nearbyint(std::ldexp(magnitude, -quantum_exponent));
  const double rounded = std::ldexp(steps, quantum_exponent);

  // Rounding may have carried into the next binade, possibly past the largest finite value.
  if (rounded >= std::ldexp(1.0, format.bias() + 1)) return static_cast<uint16_t>(infinity);
  if (rounded < std::ldexp(1.0, min_exponent)) {
    // Subnormal (or zero): the mantissa counts quanta of 2^(min_exponent - mantissa_bits).
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(steps));
  }
  int frexp_exponent;
  std::frexp(rounded, &frexp_exponent);
  const int final_exponent = frexp_exponent - 1;
  const double significand = std::ldexp(rounded, format.mantissa_bits - final_exponent);
  const uint32_t mantissa = static_cast<uint32_t>(significand) & format.mantissa_mask();
  const uint32_t biased = static_cast<uint32_t>(final_exponent + format.bias());
  return static_cast<uint16_t>(sign | (biased << format.mantissa_bits) | mantissa);
}

// encode() that also accepts NaN, giving the format's default quiet NaN.
inline uint16_t encode_any(SmallFloatFormat format, double value) {
  if (std::isnan(value)) {
    const uint32_t quiet_nan = (format.exponent_all_ones() << format.mantissa_bits) |
                               (1u << (format.mantissa_bits - 1));
    return static_cast<uint16_t>(quiet_nan);
  }
  return encode(format, value);
}

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint64_t bits_of(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

// Integer references: compute exactly in 128 bits, then reduce modulo 2^bits into T (the
// wraparound the kernels promise).
template <typename T>
T wrap(__int128 exact) {
  return static_cast<T>(static_cast<unsigned __int128>(exact));
}

// float64 reference arithmetic: one rounding from a wider exact-enough type. __float128 has
// 113 bits, enough for double rounding to be innocuous for +, *, / of doubles.
#if defined(__SIZEOF_FLOAT128__)
using WideFloat = __float128;
#else
using WideFloat = long double;  // weaker, but the best the platform offers
#endif

}  // namespace reference
}  // namespace collx
