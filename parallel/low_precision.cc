// The element loops between float32 and the 16-bit wire types; the rounding itself is
// lib/dtype's (half_convert.h).
#include "parallel/low_precision.h"

namespace collx {
namespace parallel {

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
