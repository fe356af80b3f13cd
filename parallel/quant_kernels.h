// Block quantization kernels (host, float32 in and out): symmetric int8 and int4 with one
// float32 scale per block, the building blocks of the ZeRO++-style quantized collectives
// (parallel/quant_message.h puts them into the wire format, docs/parallel-quant.md).
//
// Per block of n elements: amax = max |x|, qmax = 127 (int8) or 7 (int4),
// scale = amax / qmax, q = round_half_even(x / scale) clamped to [-qmax, qmax],
// dequantized x' = q * scale. Error bound for finite blocks:
//   |x - x'| <= kBoundFactor * scale / 2     (kBoundFactor = 1 + 2^-12 covers the
//                                             float32 rounding of scale and of x / scale)
// Special cases (the policy, documented in docs/parallel-quant.md):
//  - amax == 0 or amax < kTinyMax (2^-100): scale 0, every q 0 (the block reads back as
//    zeros; absolute error < 2^-100). Subnormal x in a block with a larger amax quantize
//    normally (to 0 or a small q) and keep the bound.
//  - any NaN or +-inf in the block: scale NaN, every q 0; the block reads back as NaN in
//    every element (so an overflow check after the collective sees it).
//  - amax near FLT_MAX: scale is lowered by one ulp if qmax * scale would overflow.
#pragma once

#include <cstddef>
#include <cstdint>

namespace collx {
namespace parallel {
namespace quant {

constexpr float kTinyMax = 0x1p-100f;
constexpr float kBoundFactor = 1.0f + 0x1p-12f;

inline int qmax_of(int bits) { return bits == 4 ? 7 : 127; }

// The scale of a block (see above): 0, NaN or amax / qmax.
float block_scale(const float* x, size_t n, int bits);

// q[i] from x[i] and the block's scale (0 or NaN: every q is 0).
void quantize_i8(const float* x, size_t n, float scale, int8_t* q);
// Two elements per byte: element 2i in the low nibble of byte i, 2i+1 in the high nibble
// (two's complement nibbles); an odd n leaves the last high nibble 0. ceil(n/2) bytes.
void quantize_i4(const float* x, size_t n, float scale, uint8_t* q);

// out[i] = q[i] * scale, and acc[i] += q[i] * scale.
void dequantize_i8(const int8_t* q, size_t n, float scale, float* out);
void dequantize_i4(const uint8_t* q, size_t n, float scale, float* out);
void dequantize_add_i8(const int8_t* q, size_t n, float scale, float* acc);
void dequantize_add_i4(const uint8_t* q, size_t n, float scale, float* acc);

}  // namespace quant
}  // namespace parallel
}  // namespace collx
