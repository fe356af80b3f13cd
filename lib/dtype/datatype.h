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
using ReduceFn = void (*)(void* dst, const void* src, size_t count);
// dst[i] = a[i] OP b[i]; dst must not overlap a or b.
using Reduce3Fn = void (*)(void* dst, const void* a, const void* b, size_t count);

// nullptr for AVG and PREMUL_SUM (callers express those as SUM plus a scale) or invalid input.
ReduceFn reduce_fn(collx_datatype_t datatype, collx_op_t op);
Reduce3Fn reduce3_fn(collx_datatype_t datatype, collx_op_t op);

// dst[i] = src[i] * scalar (dst may equal src). Integers multiply by the scalar converted to
// the datatype (truncated toward zero); float16/bfloat16 multiply in float32.
void scale(void* dst, const void* src, size_t count, collx_datatype_t datatype, double scalar);

// buf[i] = buf[i] / divisor. Integers: truncation toward zero (as NCCL's AVG). Floats: exact
// division in the type's precision (float32 for float16/bfloat16, rounded once).
void divide(void* buf, size_t count, collx_datatype_t datatype, int64_t divisor);

// IEEE binary16 and bfloat16 conversions, round to nearest even, NaN preserved.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace collx
