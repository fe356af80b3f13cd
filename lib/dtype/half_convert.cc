// Out-of-line 16-bit float conversions (declared in datatype.h) and the double-precision
// entry points used to convert a host scalar into a 16-bit datatype exactly once.
#include <cmath>
#include <cstdint>

#include "lib/dtype/datatype.h"
#include "lib/dtype/half_convert.h"

namespace collx {

using half_detail::float_bits;
using half_detail::float_from_bits;

float half_to_float(uint16_t h) { return half_detail::half_bits_to_float(h); }
uint16_t float_to_half(float f) { return half_detail::float_to_half_bits(f); }
float bfloat16_to_float(uint16_t b) { return half_detail::bfloat16_bits_to_float(b); }
uint16_t float_to_bfloat16(float f) { return half_detail::float_to_bfloat16_bits(f); }

namespace {

// Rounding a double to float to nearest and then again to a 16-bit format can round twice
// the wrong way (a value just above a tie becomes the tie, which then goes to even).
// Rounding to float "to odd" instead (truncate, then force the last bit to 1 when inexact)
// keeps the information that the value was not a tie, and because float32 has at least two
// more mantissa bits than either 16-bit format everywhere (subnormals included), the second
// rounding is then correct (Boldo and Melquiond, "Emulation of FMA and correctly rounded
// sums: proved algorithms using rounding to odd").
float round_to_odd_float(double d) {
  const float nearest = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(nearest) == d) return nearest;
  uint32_t bits = float_bits(nearest);
  if ((bits & 1u) == 0) {
    // The nearest float is the even neighbour of d; the odd one is one step towards d.
    // (This also turns an overflow to infinity back into FLT_MAX, which is odd.)
    const bool rounded_away_from_zero = std::fabs(static_cast<double>(nearest)) > std::fabs(d);
    bits = rounded_away_from_zero ? bits - 1 : bits + 1;
  }
  return float_from_bits(bits);
}

}  // namespace

uint16_t double_to_half(double d) { return half_detail::float_to_half_bits(round_to_odd_float(d)); }
uint16_t double_to_bfloat16(double d) { return half_detail::float_to_bfloat16_bits(round_to_odd_float(d)); }

}  // namespace collx
