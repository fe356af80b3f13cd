// Datatypes and reduction operations: sizes, names, validation, and the host reduction
// kernels every algorithm uses when buffers are in host memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collx/collx.h"

namespace collx {

inline bool datatype_valid(int datatype) { return datatype >= 0 && datatype < COLLX_NUM_DATATYPES; }
inline bool op_valid(int op) { return op >= 0 && op < COLLX_NUM_OPS; }
inline bool datatype_is_float(collx_datatype_t dt) {
  return dt == COLLX_FLOAT16 || dt == COLLX_BFLOAT16 || dt == COLLX_FLOAT32 || dt == COLLX_FLOAT64;
}

size_t datatype_size(int datatype);     // 0 when invalid
const char* datatype_name(int datatype);  // "unknown" when invalid
const char* op_name(int op);

// dst[i] = dst[i] OP src[i] for i < count, where OP is one of SUM, PROD, MIN, MAX.
// dst and src must not overlap. float16/bfloat16 compute in float32 and round once to
// nearest even. Integer SUM/PROD wrap around (two's complement), never undefined behaviour.
// Float MIN/MAX use the plain comparison (dst < src ? dst : src): when either operand is NaN,
// or for +0 vs -0, the result is the second operand (src; b for Reduce3Fn), so a NaN in src
// propagates and a NaN in dst is replaced. Pointers need only the element's alignment.
// The kernels use the best variant the CPU supports (kernel_isa.h); all give the same bits,
// except which input's payload a NaN result carries when both inputs are NaN.
using ReduceFn = void (*)(void* dst, const void* src, size_t count);
// dst[i] = a[i] OP b[i]; dst must not partially overlap a or b (dst == a or dst == b exactly
// is fine: every element is read before it is written).
using Reduce3Fn = void (*)(void* dst, const void* a, const void* b, size_t count);

// nullptr for AVG and PREMUL_SUM (callers express those as SUM plus a scale) or invalid input.
ReduceFn reduce_fn(collx_datatype_t datatype, collx_op_t op);
Reduce3Fn reduce3_fn(collx_datatype_t datatype, collx_op_t op);

// dst[i] = src[i] * scalar (dst may equal src, but must not otherwise overlap it). The
// scalar is first converted to the datatype, as PREMUL_SUM specifies. Integers: truncated
// toward zero (NaN -> 0, beyond the int64 range saturated), then taken modulo 2^bits like
// the product, so unsigned types scaled by -1 give the wrapped negation. float16/bfloat16:
// the scalar rounded to the type, the product computed in float32 (exactly) and rounded once.
// An invalid datatype does nothing (and asserts in debug builds), as in divide.
void scale(void* dst, const void* src, size_t count, collx_datatype_t datatype, double scalar);

// buf[i] = buf[i] / divisor, divisor >= 1 (a rank count; smaller divisors assert in debug
// builds and leave buf unchanged). Integers: truncation toward zero (as NCCL's AVG).
// Floats: a true division (not a reciprocal multiply), correctly rounded to the type as
// long as the divisor converts exactly (up to 2^24; float64: 2^53): float16, bfloat16 and
// float32 divide by float32(divisor) in float32 (the 16-bit types then round once more,
// which for one division still gives the correctly rounded quotient).
void divide(void* buf, size_t count, collx_datatype_t datatype, int64_t divisor);

// IEEE binary16 and bfloat16 conversions, round to nearest even, overflow to infinity,
// subnormals exact. NaN stays NaN with its sign (narrowing keeps the top payload bits and
// sets the quiet bit). Inline, vectorizable forms are in half_convert.h.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);
// double -> 16-bit float, rounded once (not via a float32 rounding, which could round twice
// the wrong way). Used to convert host scalars.
uint16_t double_to_half(double d);
uint16_t double_to_bfloat16(double d);

}  // namespace collx
