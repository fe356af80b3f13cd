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

namespace collx {
namespace cuda {
namespace emu {

namespace {

template <typename T>
struct Plain {
  using Store = T;
  using Acc = T;
  static Acc in(T v) { return v; }
  static T out(Acc v) { return v; }
};
struct Half {
  using Store = uint16_t;
  using Acc = float;
  static float in(uint16_t v) { return half_to_float(v); }
  static uint16_t out(float v) { return float_to_half(v); }
};
struct BFloat16 {
  using Store = uint16_t;
  using Acc = float;
  static float in(uint16_t v) { return bfloat16_to_float(v); }
  static uint16_t out(float v) { return float_to_bfloat16(v); }
};

// Integers wrap (computed on the unsigned type), as the kernels do.
template <typename A>
A combine(collx_op_t op, A a, A b) {
  if constexpr (std::is_integral<A>::value) {
    using U = typename std::make_unsigned<A>::type;
    using W = typename std::conditional<(sizeof(U) < sizeof(unsigned)), unsigned, U>::type;
    if (op == COLLX_PROD) return static_cast<A>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
    if (op == COLLX_MIN) return a < b ? a : b;
    if (op == COLLX_MAX) return a > b ? a : b;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    if (op == COLLX_PROD) return a * b;
    if (op == COLLX_MIN) return a < b ? a : b;
    if (op == COLLX_MAX) return a > b ? a : b;
    return a + b;
  }
}

template <typename N>
typename N::Store finish(collx_op_t op, typename N::Acc acc, int64_t divisor) {
  using A = typename N::Acc;
  if (op == COLLX_AVG) {
    if constexpr (std::is_integral<A>::value) {
      return N::out(static_cast<A>(acc / static_cast<A>(divisor)));
    } else if constexpr (std::is_same<A, double>::value) {
      return N::out(acc / static_cast<double>(divisor));
    } else {
      return N::out(acc / static_cast<float>(divisor));
    }
  }
  return N::out(acc);
}

constexpr size_t kBlock = 2048;

template <typename N>
void reduce_n(const std::vector<char*>& outs, const std::vector<const char*>& ins, size_t count,
              collx_datatype_t datatype, collx_op_t op, double scalar, int64_t divisor) {
  using S = typename N::Store;
  using A = typename N::Acc;
  const collx_op_t fold = (op == COLLX_AVG || op == COLLX_PREMUL_SUM) ? COLLX_SUM : op;
  A acc[kBlock];
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
      for (size_t k = 0; k < n; ++k) acc[k] = j == 0 ? N::in(term[k]) : combine<A>(fold, acc[k], N::in(term[k]));
    }
    for (size_t k = 0; k < n; ++k) result[k] = finish<N>(op, acc[k], divisor);
    for (char* out : outs) std::copy(result, result + n, reinterpret_cast<S*>(out) + lo);
  }
}

void run_reduce_n(const std::vector<char*>& outs, const std::vector<const char*>& ins, size_t count,
                  collx_datatype_t dt, collx_op_t op, double scalar, int64_t divisor) {
  switch (dt) {
    case COLLX_INT8: return reduce_n<Plain<int8_t>>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_UINT8: return reduce_n<Plain<uint8_t>>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_INT32: return reduce_n<Plain<int32_t>>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_UINT32: return reduce_n<Plain<uint32_t>>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_INT64: return reduce_n<Plain<int64_t>>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_UINT64: return reduce_n<Plain<uint64_t>>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_FLOAT16: return reduce_n<Half>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_BFLOAT16: return reduce_n<BFloat16>(outs, ins, count, dt, op, scalar, divisor);
    case COLLX_FLOAT32: return reduce_n<Plain<float>>(outs, ins, count, dt, op, scalar, divisor);
    default: return reduce_n<Plain<double>>(outs, ins, count, dt, op, scalar, divisor);
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
