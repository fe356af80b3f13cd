// Rounding between float32 and the 16-bit wire types, written out so that the parallel
// layer depends only on the public API.
#include "parallel/low_precision.h"

#include <cstring>

namespace collx {
namespace parallel {

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even on the dropped 16 bits
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): shift the implicit-one mantissa, rounding to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // value = mant * 2^(exp-150) = half * 2^-24
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t v = abs - 0x38000000u;  // rebias exponent 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      u = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void pack_half(const float* src, uint16_t* dst, size_t n, float scale, int32_t half_type) {
  const bool bf = half_type == COLLX_BFLOAT16;
  for (size_t i = 0; i < n; ++i) {
    const float v = scale == 1.0f ? src[i] : src[i] * scale;
    dst[i] = bf ? float_to_bf16(v) : float_to_fp16(v);
  }
}

void unpack_half(const uint16_t* src, float* dst, size_t n, float scale, int32_t half_type) {
  const bool bf = half_type == COLLX_BFLOAT16;
  for (size_t i = 0; i < n; ++i) {
    const float v = bf ? bf16_to_float(src[i]) : fp16_to_float(src[i]);
    dst[i] = scale == 1.0f ? v : v * scale;
  }
}

void scale_in_place(float* p, size_t n, float scale) {
  if (scale == 1.0f) return;
  for (size_t i = 0; i < n; ++i) p[i] *= scale;
}

}  // namespace parallel
}  // namespace collx
