// The x86 AVX2 + F16C variant of the host reduction kernels, chosen at run time when the
// CPU supports both (see kernel_isa.h). The generic loops of reduce_loops.h are compiled
// here a second time under an AVX2 target (twice the lanes of the SSE2 baseline and the
// pack/blend instructions the 16-bit conversions need); float16 additionally converts with
// the F16C instructions, which are exact and round to nearest even like the portable
// conversions, so both variants give the same bits (up to which input's payload a NaN
// result carries when both inputs are NaN, which IEEE leaves open).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "lib/dtype/kernel_isa.h"

#if COLLX_DTYPE_X86_KERNELS

#include <cpuid.h>
#include <immintrin.h>

// Every header with external-linkage inline code (the standard library, the conversions)
// is included BEFORE the target pragma, so those functions are compiled for the baseline
// target: the linker keeps one copy of each, shared with the portable file, and that copy
// must run on any CPU. They still inline into the AVX2 functions below.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lib/dtype/datatype.h"
#include "lib/dtype/element_codec.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif

#include "lib/dtype/reduce_loops.h"  // unnamed namespace: this file's own AVX2 copies

namespace collx {
namespace {

using dtype_detail::MaxOp;
using dtype_detail::MinOp;
using dtype_detail::ProdOp;
using dtype_detail::SumOp;

// The vector form of each op. min_ps/max_ps return the second operand when either is NaN
// or both are zero, exactly like the scalar MinOp/MaxOp (a < b ? a : b).
template <typename Op>
struct VectorOp;
template <>
struct VectorOp<SumOp> {
  static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
template <>
struct VectorOp<ProdOp> {
  static __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
};
template <>
struct VectorOp<MinOp> {
  static __m256 apply(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
};
template <>
struct VectorOp<MaxOp> {
  static __m256 apply(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
};

inline __m256 load_half8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Rounding given in the instruction (nearest even), not taken from MXCSR.
inline void store_half8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

// Eight elements at a time through F16C; the remainder through the generic loop, whose
// software conversions round identically.
template <typename Codec, typename Op>
void f16c_reduce_kernel(void* dst, const void* src, size_t count) {
  uint16_t* out = static_cast<uint16_t*>(dst);
  const uint16_t* in = static_cast<const uint16_t*>(src);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    store_half8(out + i, VectorOp<Op>::apply(load_half8(out + i), load_half8(in + i)));
  }
  reduce_loops::reduce_kernel<Codec, Op>(out + i, in + i, count - i);
}

// dst may be exactly a or b: both inputs of a block are loaded before it is stored.
template <typename Codec, typename Op>
void f16c_reduce3_kernel(void* dst, const void* a, const void* b, size_t count) {
  uint16_t* out = static_cast<uint16_t*>(dst);
  const uint16_t* left = static_cast<const uint16_t*>(a);
  const uint16_t* right = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    store_half8(out + i, VectorOp<Op>::apply(load_half8(left + i), load_half8(right + i)));
  }
  reduce_loops::reduce3_kernel<Codec, Op>(out + i, left + i, right + i, count - i);
}

template <typename Codec, typename Op>
struct F16cReduce2 {
  static constexpr ReduceFn fn = &f16c_reduce_kernel<Codec, Op>;
};

template <typename Codec, typename Op>
struct F16cReduce3 {
  static constexpr Reduce3Fn fn = &f16c_reduce3_kernel<Codec, Op>;
};

}  // namespace

namespace x86_avx2_f16c {

ReduceFn reduce_fn(collx_datatype_t datatype, collx_op_t op) {
  return reduce_loops::Table<reduce_loops::Reduce2, ReduceFn, F16cReduce2>::lookup(datatype, op);
}

Reduce3Fn reduce3_fn(collx_datatype_t datatype, collx_op_t op) {
  return reduce_loops::Table<reduce_loops::Reduce3, Reduce3Fn, F16cReduce3>::lookup(datatype, op);
}

}  // namespace x86_avx2_f16c
}  // namespace collx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace collx {
namespace x86_avx2_f16c {

// Baseline code: runs on every CPU to decide whether the code above may.
bool cpu_supported() {
  static const bool supported = [] {
    // __builtin_cpu_supports("avx2") also checks that the OS saves the AVX registers.
    // F16C is read from CPUID directly (not every compiler knows it as a feature name).
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool has_f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    return __builtin_cpu_supports("avx2") && has_f16c;
  }();
  return supported;
}

}  // namespace x86_avx2_f16c
}  // namespace collx

#endif  // COLLX_DTYPE_X86_KERNELS
