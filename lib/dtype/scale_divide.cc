// scale (PREMUL_SUM's pre-multiplication) and divide (AVG's final division) on host buffers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lib/dtype/datatype.h"
#include "lib/dtype/element_codec.h"

namespace collx {

namespace {

using namespace dtype_detail;

// dst[i] = op(src[i]), as two loops so the compiler may assume no aliasing in the common
// out-of-place case without a runtime overlap check, and the in-place case stays correct.
template <typename Storage, typename ElementOp>
void map_elements(void* dst, const void* src, size_t count, ElementOp op) {
  if (dst == src) {
    Storage* buf = static_cast<Storage*>(dst);
    for (size_t i = 0; i < count; ++i) buf[i] = op(buf[i]);
    return;
  }
  Storage* __restrict__ out = static_cast<Storage*>(dst);
  const Storage* __restrict__ in = static_cast<const Storage*>(src);
  for (size_t i = 0; i < count; ++i) out[i] = op(in[i]);
}

// The scalar as an integer: truncated toward zero, NaN -> 0, beyond the int64 range
// saturated (a plain cast would be undefined behaviour there).
int64_t truncate_to_int64(double scalar) {
  if (scalar != scalar) return 0;
  if (scalar >= 0x1p63) return INT64_MAX;
  if (scalar <= -0x1p63) return INT64_MIN;
  return static_cast<int64_t>(scalar);
}

template <typename T>
void scale_integer(void* dst, const void* src, size_t count, double scalar) {
  // Converting the int64 factor to T's width keeps it modulo 2^bits, and the product is
  // taken modulo 2^bits too, consistent with the wrapping SUM/PROD kernels (e.g. a uint8
  // scaled by -1 becomes 256 - x, i.e. -x modulo 256).
  using Codec = WrappingCodec<T>;
  using U = typename Codec::Value;
  const U factor = static_cast<U>(truncate_to_int64(scalar));
  map_elements<T>(dst, src, count,
                  [factor](T x) { return Codec::store(static_cast<U>(Codec::load(x) * factor)); });
}

template <typename Codec>
void scale_float(void* dst, const void* src, size_t count, typename Codec::Value factor) {
  map_elements<typename Codec::Storage>(dst, src, count, [factor](typename Codec::Storage x) {
    return Codec::store(Codec::load(x) * factor);
  });
}

// Integer division truncating toward zero; divisor >= 1.
template <typename T>
void divide_integer(T* buf, size_t count, int64_t divisor) {
  if constexpr (sizeof(T) <= 4) {
    // x86 has no vector integer division, so divide in double, which is exact here: for
    // |x| < 2^32 and an integer d <= 2^32 (both exact in double), a quotient x/d that is not
    // an integer lies at least 1/d from every integer, while the rounding error of the
    // double division is at most |x/d| * 2^-53 < 2^-21 / d. So truncating the rounded
    // quotient gives the same integer as truncating the exact one.
    if (divisor > (int64_t{1} << 32)) {
      for (size_t i = 0; i < count; ++i) buf[i] = 0;  // |x| < 2^32 < divisor
      return;
    }
    const double d = static_cast<double>(divisor);
    // A signed type that holds every T (int32 converts from double with SIMD; uint32 needs int64).
    using Wide = std::conditional_t<std::is_signed_v<T> || sizeof(T) < 4, int32_t, int64_t>;
    for (size_t i = 0; i < count; ++i) {
      buf[i] = static_cast<T>(static_cast<Wide>(static_cast<double>(buf[i]) / d));
    }
  } else {
    // 64-bit: plain integer division. No INT64_MIN / -1 overflow since divisor >= 1.
    using Divisor = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    const Divisor d = static_cast<Divisor>(divisor);
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<T>(buf[i] / d);
  }
}

template <typename Codec>
void divide_float(void* buf, size_t count, typename Codec::Value divisor) {
  // A true division, not a multiplication by the reciprocal (which would round twice).
  // For float16/bfloat16 the float32 quotient is rounded again to 16 bits, which still
  // gives the correctly rounded quotient: float32 has more than 2p+2 bits for both formats,
  // so this double rounding is innocuous (Figueroa, "When is double rounding innocuous?").
  map_elements<typename Codec::Storage>(buf, buf, count, [divisor](typename Codec::Storage x) {
    return Codec::store(Codec::load(x) / divisor);
  });
}

}  // namespace

void scale(void* dst, const void* src, size_t count, collx_datatype_t datatype, double scalar) {
  switch (datatype) {
    case COLLX_INT8: return scale_integer<int8_t>(dst, src, count, scalar);
    case COLLX_UINT8: return scale_integer<uint8_t>(dst, src, count, scalar);
    case COLLX_INT32: return scale_integer<int32_t>(dst, src, count, scalar);
    case COLLX_UINT32: return scale_integer<uint32_t>(dst, src, count, scalar);
    case COLLX_INT64: return scale_integer<int64_t>(dst, src, count, scalar);
    case COLLX_UINT64: return scale_integer<uint64_t>(dst, src, count, scalar);
    // The scalar is first converted to the datatype (as the ABI specifies for PREMUL_SUM).
    // The product of two 16-bit floats is exact in float32, so the result is rounded once.
    case COLLX_FLOAT16:
      return scale_float<Float16Codec>(dst, src, count, half_to_float(double_to_half(scalar)));
    case COLLX_BFLOAT16:
      return scale_float<BFloat16Codec>(dst, src, count,
                                        bfloat16_to_float(double_to_bfloat16(scalar)));
    case COLLX_FLOAT32: return scale_float<PlainCodec<float>>(dst, src, count, static_cast<float>(scalar));
    case COLLX_FLOAT64: return scale_float<PlainCodec<double>>(dst, src, count, scalar);
    case COLLX_NUM_DATATYPES: break;
  }
  assert(false && "scale: invalid datatype");
}

void divide(void* buf, size_t count, collx_datatype_t datatype, int64_t divisor) {
  assert(divisor >= 1 && "divide: the divisor is a rank count, at least 1");
  if (divisor < 1) return;  // a caller bug; leave the data alone rather than divide by <= 0
  switch (datatype) {
    case COLLX_INT8: return divide_integer(static_cast<int8_t*>(buf), count, divisor);
    case COLLX_UINT8: return divide_integer(static_cast<uint8_t*>(buf), count, divisor);
    case COLLX_INT32: return divide_integer(static_cast<int32_t*>(buf), count, divisor);
    case COLLX_UINT32: return divide_integer(static_cast<uint32_t*>(buf), count, divisor);
    case COLLX_INT64: return divide_integer(static_cast<int64_t*>(buf), count, divisor);
    case COLLX_UINT64: return divide_integer(static_cast<uint64_t*>(buf), count, divisor);
    // float32 holds every divisor up to 2^24 exactly (rank counts are far below that).
    case COLLX_FLOAT16: return divide_float<Float16Codec>(buf, count, static_cast<float>(divisor));
    case COLLX_BFLOAT16: return divide_float<BFloat16Codec>(buf, count, static_cast<float>(divisor));
    case COLLX_FLOAT32: return divide_float<PlainCodec<float>>(buf, count, static_cast<float>(divisor));
    case COLLX_FLOAT64: return divide_float<PlainCodec<double>>(buf, count, static_cast<double>(divisor));
    case COLLX_NUM_DATATYPES: break;
  }
  assert(false && "divide: invalid datatype");
}

}  // namespace collx
