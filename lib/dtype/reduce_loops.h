// The generic reduction loops and their (datatype, op) lookup, as templates to be
// instantiated once per instruction-set variant: reduce_kernels.cc compiles them for the
// baseline target, reduce_kernels_x86.cc again under an AVX2 target pragma.
//
// Everything here is in an unnamed namespace on purpose: each including file must get its
// own internal copies. Ordinary (external-linkage) template instances would be merged by
// the linker across the two files, and an AVX2-compiled copy could then end up in the
// baseline table and fault on a CPU without AVX2.
#pragma once

#include <cstddef>
#include <type_traits>

#include "lib/dtype/datatype.h"
#include "lib/dtype/element_codec.h"

namespace collx {
namespace {
namespace reduce_loops {

using namespace dtype_detail;

// One flat loop with the conversions and the op inlined: GCC and Clang auto-vectorize it
// (the 16-bit float conversions are branch-free for that reason, see half_convert.h).
template <typename Codec, typename Op>
void reduce_kernel(void* dst, const void* src, size_t count) {
  using Storage = typename Codec::Storage;
  Storage* __restrict__ out = static_cast<Storage*>(dst);
  const Storage* __restrict__ in = static_cast<const Storage*>(src);
  for (size_t i = 0; i < count; ++i) {
    out[i] = Codec::store(Op::apply(Codec::load(out[i]), Codec::load(in[i])));
  }
}

// Also correct when dst is exactly a or b (despite __restrict__): each output element
// depends only on the inputs at the same index, which are loaded before it is stored.
template <typename Codec, typename Op>
void reduce3_kernel(void* dst, const void* a, const void* b, size_t count) {
  using Storage = typename Codec::Storage;
  Storage* __restrict__ out = static_cast<Storage*>(dst);
  const Storage* __restrict__ left = static_cast<const Storage*>(a);
  const Storage* __restrict__ right = static_cast<const Storage*>(b);
  for (size_t i = 0; i < count; ++i) {
    out[i] = Codec::store(Op::apply(Codec::load(left[i]), Codec::load(right[i])));
  }
}

template <typename Codec, typename Op>
struct Reduce2 {
  static constexpr ReduceFn fn = &reduce_kernel<Codec, Op>;
};

template <typename Codec, typename Op>
struct Reduce3 {
  static constexpr Reduce3Fn fn = &reduce3_kernel<Codec, Op>;
};

// The codec of an integer type under an op: SUM/PROD wrap (unsigned arithmetic), MIN/MAX
// compare as the type's own signedness.
template <typename T, bool kArithmetic>
using IntegerCodec = std::conditional_t<kArithmetic, WrappingCodec<T>, PlainCodec<T>>;

// The kernel for (datatype, op) of the given shape (Reduce2 or Reduce3): one row of four
// per datatype, in SUM, PROD, MIN, MAX order (the first four collx_op_t values).
// Float16Shape lets a variant substitute its own float16 kernels (hardware conversions).
template <template <typename, typename> class Shape, typename Fn,
          template <typename, typename> class Float16Shape = Shape>
struct Table {
  template <typename T>
  struct IntegerOps {
    static constexpr Fn row[4] = {Shape<IntegerCodec<T, true>, SumOp>::fn,
                                  Shape<IntegerCodec<T, true>, ProdOp>::fn,
                                  Shape<IntegerCodec<T, false>, MinOp>::fn,
                                  Shape<IntegerCodec<T, false>, MaxOp>::fn};
  };
  template <template <typename, typename> class RowShape, typename Codec>
  struct FloatOps {
    static constexpr Fn row[4] = {RowShape<Codec, SumOp>::fn, RowShape<Codec, ProdOp>::fn,
                                  RowShape<Codec, MinOp>::fn, RowShape<Codec, MaxOp>::fn};
  };

  static Fn lookup(collx_datatype_t datatype, collx_op_t op) {
    if (!datatype_valid(datatype) || !op_valid(op)) return nullptr;
    // AVG and PREMUL_SUM are not elementwise kernels: callers run SUM plus scale/divide.
    if (op != COLLX_SUM && op != COLLX_PROD && op != COLLX_MIN && op != COLLX_MAX) return nullptr;
    switch (datatype) {
      case COLLX_INT8: return IntegerOps<int8_t>::row[op];
      case COLLX_UINT8: return IntegerOps<uint8_t>::row[op];
      case COLLX_INT32: return IntegerOps<int32_t>::row[op];
      case COLLX_UINT32: return IntegerOps<uint32_t>::row[op];
      case COLLX_INT64: return IntegerOps<int64_t>::row[op];
      case COLLX_UINT64: return IntegerOps<uint64_t>::row[op];
      case COLLX_FLOAT16: return FloatOps<Float16Shape, Float16Codec>::row[op];
      case COLLX_BFLOAT16: return FloatOps<Shape, BFloat16Codec>::row[op];
      case COLLX_FLOAT32: return FloatOps<Shape, PlainCodec<float>>::row[op];
      case COLLX_FLOAT64: return FloatOps<Shape, PlainCodec<double>>::row[op];
      case COLLX_NUM_DATATYPES: break;
    }
    return nullptr;
  }
};

}  // namespace reduce_loops
}  // namespace
}  // namespace collx
