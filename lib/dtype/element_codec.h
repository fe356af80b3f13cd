// Building blocks of the host kernels: a Codec says how an element is stored and in which
// type it is computed on (load/store convert between the two); an Op combines two computed
// values. The kernels are loops of Codec::store(Op::apply(Codec::load(a), Codec::load(b))),
// everything inline so the compiler sees one flat loop it can vectorize.
#pragma once

#include <cstdint>
#include <type_traits>

#include "lib/dtype/half_convert.h"

namespace collx {
namespace dtype_detail {

// Stored and computed as T: floats, and integers under MIN/MAX.
template <typename T>
struct PlainCodec {
  using Storage = T;
  using Value = T;
  static Value load(Storage s) { return s; }
  static Storage store(Value v) { return v; }
};

// Integers under SUM/PROD: computed in the unsigned type of the same width, where overflow
// wraps modulo 2^bits by definition, then stored back (two's complement, which is what GCC
// and Clang define for the unsigned-to-signed conversion, and what C++20 mandates).
// No 16-bit integers are involved, so no unsigned operand promotes to a signed int that
// could overflow: uint8 products fit in int, and 32/64-bit ones stay unsigned.
template <typename T>
struct WrappingCodec {
  using Storage = T;
  using Value = std::make_unsigned_t<T>;
  static Value load(Storage s) { return static_cast<Value>(s); }
  static Storage store(Value v) { return static_cast<Storage>(v); }
};

// IEEE binary16, computed in float32 and rounded once on store.
struct Float16Codec {
  using Storage = uint16_t;
  using Value = float;
  static Value load(Storage s) { return half_detail::half_bits_to_float(s); }
  static Storage store(Value v) { return half_detail::float_to_half_bits(v); }
};

// bfloat16, computed in float32 and rounded once on store.
struct BFloat16Codec {
  using Storage = uint16_t;
  using Value = float;
  static Value load(Storage s) { return half_detail::bfloat16_bits_to_float(s); }
  static Storage store(Value v) { return half_detail::float_to_bfloat16_bits(v); }
};

// static_cast back to V: operands narrower than int are promoted for the arithmetic.
struct SumOp {
  template <typename V>
  static V apply(V a, V b) { return static_cast<V>(a + b); }
};

struct ProdOp {
  template <typename V>
  static V apply(V a, V b) { return static_cast<V>(a * b); }
};

// The plain comparison, which compiles to minps/maxps-style instructions. For floats this
// means: if either operand is NaN the comparison is false and the result is b (the second
// operand, i.e. src in dst = dst OP src); and min(+0, -0) / max(+0, -0) also give b.
struct MinOp {
  template <typename V>
  static V apply(V a, V b) { return a < b ? a : b; }
};

struct MaxOp {
  template <typename V>
  static V apply(V a, V b) { return a > b ? a : b; }
};

}  // namespace dtype_detail
}  // namespace collx
