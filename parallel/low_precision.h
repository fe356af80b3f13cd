// float32 <-> bfloat16 / float16 rounding for the compression paths (round to nearest
// even, NaN kept NaN), and the element loops the dp and zero layers share. The conversions
// are lib/dtype's (half_convert.h; lib/dtype is usable from every layer, docs/design.md), so
// the parallel layer rounds exactly as the reductions do and keeps no copy of its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collx/collx.h"
#include "lib/dtype/half_convert.h"

namespace collx {
namespace parallel {

// Inline so pack_half/unpack_half's loops inline and vectorize them.
inline uint16_t float_to_bf16(float f) { return half_detail::float_to_bfloat16_bits(f); }
inline float bf16_to_float(uint16_t h) { return half_detail::bfloat16_bits_to_float(h); }
inline uint16_t float_to_fp16(float f) { return half_detail::float_to_half_bits(f); }
inline float fp16_to_float(uint16_t h) { return half_detail::half_bits_to_float(h); }

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
