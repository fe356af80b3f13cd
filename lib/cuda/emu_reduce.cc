// The reduction "kernels" of the emulated device: run on the stream's worker over the
// emulator's aliases, with the CUDA kernels' semantics (reduce_kernels.cuh, reduce_n.cu):
// cuda_reduce is the host pairwise kernel (lib/dtype, same semantics by design); cuda_reduce_n
// folds all inputs in the kernel's accumulator type (float32 for float16/bfloat16, rounded
// once at the end), PREMUL_SUM scaling each input rounded to the datatype first (the host
// scale()), AVG dividing the accumulated sum.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "lib/cuda/backends.h"
#include "lib/cuda/emu_memory.h"
#include "lib/cuda/emu_stream.h"
#include "lib/dtype/datatype.h"
#include "lib/dtype/element_codec.h"

namespace collx {
namespace cuda {
namespace emu {

namespace {

using dtype_detail::BFloat16Codec;
using dtype_detail::Float16Codec;
using dtype_detail::MaxOp;
using dtype_detail::MinOp;
using dtype_detail::PlainCodec;
using dtype_detail::ProdOp;
using dtype_detail::SumOp;
using dtype_detail::WrappingCodec;

constexpr size_t kBlock = 2048;

// outs[o][i] = Op folded over ins[j][i] in the codec's computed type, stored once. AVG: the
// integer sum is stored (wrapped) and then divided, truncating toward zero; a float sum is
// divided before its one rounding, as the kernel does.
template <typename Codec, typename Op>
void fold(const std::vector<char*>& outs, const std::vector<const char*>& ins, size_t count,
          collx_datatype_t datatype, collx_op_t op, double scalar, int64_t divisor) {
  using S = typename Codec::Storage;
  using V = typename Codec::Value;
  V acc[kBlock];
  S term[kBlock], result[kBlock];
  for (size_t lo = 0; lo < count; lo += kBlock) {
    const size_t n = std::min(kBlock, count - lo);
    for (size_t j = 0; j < ins.size(); ++j) {
      const S* src = reinterpret_cast<const S*>(ins[j]) + lo;
      if (op == COLLX_PREMUL_SUM) {
        scale(term, src, n, datatype, scalar);  // rounded to the datatype, as the kernel's load
      } else {
        std::copy(src, src + n, term);
      }
      for (size_t k = 0; k < n; ++k) acc[k] = j == 0 ? Codec::load(term[k]) : Op::apply(acc[k], Codec::load(term[k]));
    }
    for (size_t k = 0; k < n; ++k) {
      if (op != COLLX_AVG) {
        result[k] = Codec::store(acc[k]);
      } else if constexpr (std::is_integral<V>::value) {
        result[k] = static_cast<S>(Codec::store(acc[k]) / static_cast<S>(divisor));
      } else {
        result[k] = Codec::store(acc[k] / static_cast<V>(divisor));
      }
    }
    for (char* out : outs) std::copy(result, result + n, reinterpret_cast<S*>(out) + lo);
  }
}

template <typename Codec>
void fold_op(const std::vector<char*>& outs, const std::vector<const char*>& ins, size_t count, collx_datatype_t dt,
             collx_op_t op, double scalar, int64_t divisor) {
  switch (op) {
    case COLLX_PROD: return fold<Codec, ProdOp>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_MIN: return fold<Codec, MinOp>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_MAX: return fold<Codec, MaxOp>(outs, ins, count, dt, op, scalar, divisor);
    default: return fold<Codec, SumOp>(outs, ins, count, dt, op, scalar, divisor);  // SUM, AVG, PREMUL_SUM
  }
}

// Integers: wrapping arithmetic for SUM/PROD (and AVG, PREMUL_SUM), signed compares for MIN/MAX.
template <typename T>
void fold_integer(const std::vector<char*>& outs, const std::vector<const char*>& ins, size_t count,
                  collx_datatype_t dt, collx_op_t op, double scalar, int64_t divisor) {
  if (op == COLLX_MIN || op == COLLX_MAX) return fold_op<PlainCodec<T>>(outs, ins, count, dt, op, scalar, divisor);
  fold_op<WrappingCodec<T>>(outs, ins, count, dt, op, scalar, divisor);
}

void run_reduce_n(const std::vector<char*>& outs, const std::vector<const char*>& ins, size_t count,
                  collx_datatype_t dt, collx_op_t op, double scalar, int64_t divisor) {
  switch (dt) {
    case COLLX_INT8: return fold_integer<int8_t>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_UINT8: return fold_integer<uint8_t>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_INT32: return fold_integer<int32_t>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_UINT32: return fold_integer<uint32_t>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_INT64: return fold_integer<int64_t>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_UINT64: return fold_integer<uint64_t>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_FLOAT16: return fold_op<Float16Codec>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_BFLOAT16: return fold_op<BFloat16Codec>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_FLOAT32: return fold_op<PlainCodec<float>>(outs, ins, count, dt, op, scalar, divisor);
    default: return fold_op<PlainCodec<double>>(outs, ins, count, dt, op, scalar, divisor);
  }
}

}  // namespace

Status cuda_reduce(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype, collx_op_t op,
                   void* stream) {
  if (count == 0) return Status::Ok();
  if (!dst || !a || !b) return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce: a NULL buffer for %zu elements", count);
  if (!datatype_valid(datatype)) {
    return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce: unknown datatype %d", static_cast<int>(datatype));
  }
  Reduce3Fn fn = reduce3_fn(datatype, op);
  if (!fn) {
    return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce: op %s (%d) is not SUM, PROD, MIN or MAX (AVG and "
                       "PREMUL_SUM go through cuda_reduce_n)", op_name(op), static_cast<int>(op));
  }
  const size_t bytes = count * datatype_size(datatype);
  Resolved d, x, y;
  COLLX_RETURN_IF_ERROR(resolve(dst, bytes, "cuda_reduce (output)", &d));
  COLLX_RETURN_IF_ERROR(resolve(a, bytes, "cuda_reduce (first input)", &x));
  COLLX_RETURN_IF_ERROR(resolve(b, bytes, "cuda_reduce (second input)", &y));
  return enqueue(stream, "cuda_reduce", [fn, d, x, y, count] {
    fn(d.alias, x.alias, y.alias, count);
    return Status::Ok();
  });
}

Status cuda_reduce_n(void* const* outputs, int n_out, const void* const* inputs, int n, size_t count,
                     collx_datatype_t datatype, collx_op_t op, double scalar, int64_t divisor, void* stream) {
  if (count == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_reduce_n_args(outputs, n_out, inputs, n, op, divisor));
  if (!datatype_valid(datatype)) {
    return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce_n: unknown datatype %d", static_cast<int>(datatype));
  }
  const size_t bytes = count * datatype_size(datatype);
  std::vector<Resolved> held(static_cast<size_t>(n + n_out));
  std::vector<char*> outs;
  std::vector<const char*> ins;
  for (int j = 0; j < n; ++j) {
    COLLX_RETURN_IF_ERROR(resolve(inputs[j], bytes, "cuda_reduce_n (an input)", &held[static_cast<size_t>(j)]));
    ins.push_back(held[static_cast<size_t>(j)].alias);
  }
  for (int o = 0; o < n_out; ++o) {
    Resolved& r = held[static_cast<size_t>(n + o)];
    COLLX_RETURN_IF_ERROR(resolve(outputs[o], bytes, "cuda_reduce_n (an output)", &r));
    outs.push_back(r.alias);
  }
  return enqueue(stream, "cuda_reduce_n", [held, outs, ins, count, datatype, op, scalar, divisor] {
    run_reduce_n(outs, ins, count, datatype, op, scalar, divisor);
    return Status::Ok();
  });
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
