// float32 <-> bfloat16 / float16 rounding for the compression paths (round to nearest
// even, NaN kept NaN), and the element loops the dp and zero layers share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collx/collx.h"

namespace collx {
namespace parallel {

uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_fp16(float f);
float fp16_to_float(uint16_t h);

// True for the two 16-bit wire types the compression paths accept.
inline bool is_half_type(int32_t dt) { return dt == COLLX_BFLOAT16 || dt == COLLX_FLOAT16; }

// dst[i] = round(src[i] * scale) in `half_type`, for i < n.
void pack_half(const float* src, uint16_t* dst, size_t n, float scale, int32_t half_type);
// dst[i] = float(src[i]) * scale.
void unpack_half(const uint16_t* src, float* dst, size_t n, float scale, int32_t half_type);
// p[i] *= scale; nothing when scale == 1 (keeps the W = 1 path bit-exact).
void scale_in_place(float* p, size_t n, float scale);

}  // namespace parallel
}  // namespace collx
