// Device reductions: the pairwise entry point cuda_reduce, and cuda_reduce_n, which folds up
// to kMaxReduceInputs inputs (peers' buffers mapped through CUDA IPC) with every op of collx.
#include <cmath>
#include <mutex>

#include "lib/cuda/backends.h"
#include "lib/cuda/reduce_kernels.cuh"
#include "lib/dtype/datatype.h"

namespace collx {
namespace cuda {
namespace kernels {

unsigned grid_for(size_t work) {
  static int sms = 0;
  static std::once_flag once;
  std::call_once(once, [] { sms = multiprocessor_count(); });
  const size_t cap = static_cast<size_t>(sms > 0 ? sms : 32) * (2048 / kThreads);
  size_t blocks = (work + kThreads - 1) / kThreads;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks);
}

struct Inputs {
  const void* p[kMaxReduceInputs];
  void* out[kMaxReduceInputs];
  int n_out;
};

template <typename T>
__device__ __forceinline__ typename Num<T>::Acc combine(int op, typename Num<T>::Acc acc, typename Num<T>::Acc v) {
  switch (op) {
    case COLLX_PROD: return OpProd::apply(acc, v);
    case COLLX_MIN: return OpMin::apply(acc, v);
    case COLLX_MAX: return OpMax::apply(acc, v);
    default: return OpSum::apply(acc, v);  // SUM, AVG, PREMUL_SUM
  }
}

// One element of input k, scaled for PREMUL_SUM (the scalar is already of the datatype; the
// product is rounded to the datatype, as the host's scale() does).
template <typename T>
__device__ __forceinline__ typename Num<T>::Acc load_in(int op, T x, typename Num<T>::Acc scalar) {
  using N = Num<T>;
  if (op == COLLX_PREMUL_SUM) return N::in(N::out(wrap_mul(N::in(x), scalar)));
  return N::in(x);
}

template <typename T>
__device__ __forceinline__ T finish(int op, typename Num<T>::Acc acc, int64_t divisor) {
  using N = Num<T>;
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

template <typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_n_kernel(Inputs in, int n, size_t count, int op, typename Num<T>::Acc scalar, int64_t divisor, bool vec) {
  using A = typename Num<T>::Acc;
  constexpr int V = 16 / sizeof(T);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t nv = count / V;
    for (size_t i = tid; i < nv; i += stride) {
      A acc[V];
      uint4 x = static_cast<const uint4*>(in.p[0])[i];
      const T* px = reinterpret_cast<const T*>(&x);
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = load_in<T>(op, px[k], scalar);
      for (int j = 1; j < n; ++j) {
        uint4 y = static_cast<const uint4*>(in.p[j])[i];
        const T* py = reinterpret_cast<const T*>(&y);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = combine<T>(op, acc[k], load_in<T>(op, py[k], scalar));
      }
      uint4 r;
      T* pr = reinterpret_cast<T*>(&r);
#pragma unroll
      for (int k = 0; k < V; ++k) pr[k] = finish<T>(op, acc[k], divisor);
      for (int o = 0; o < in.n_out; ++o) static_cast<uint4*>(in.out[o])[i] = r;
    }
    done = nv * V;
  }
  for (size_t i = done + tid; i < count; i += stride) {
    A acc = load_in<T>(op, static_cast<const T*>(in.p[0])[i], scalar);
    for (int j = 1; j < n; ++j) acc = combine<T>(op, acc, load_in<T>(op, static_cast<const T*>(in.p[j])[i], scalar));
    const T r = finish<T>(op, acc, divisor);
    for (int o = 0; o < in.n_out; ++o) static_cast<T*>(in.out[o])[i] = r;
  }
}

// PREMUL_SUM's scalar converted to the datatype as scale() does: integers truncated toward
// zero (NaN -> 0, saturated to int64, then wrapped), floats rounded to the type.
int64_t integer_scalar(double s) {
  if (std::isnan(s)) return 0;
  if (s >= 9223372036854775807.0) return INT64_MAX;
  if (s <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(s);
}

template <typename T>
typename Num<T>::Acc scalar_of(double s) {
  using A = typename Num<T>::Acc;
  if constexpr (std::is_integral<A>::value) {
    using U = typename std::make_unsigned<A>::type;
    return static_cast<A>(static_cast<U>(static_cast<uint64_t>(integer_scalar(s))));
  } else if constexpr (std::is_same<T, __half>::value) {
    return half_to_float(float_to_half(static_cast<float>(s)));
  } else if constexpr (std::is_same<T, __nv_bfloat16>::value) {
    return bfloat16_to_float(float_to_bfloat16(static_cast<float>(s)));
  } else {
    return static_cast<A>(s);
  }
}

template <typename T>
Status launch_reduce_n(const Inputs& in, int n, size_t count, int op, double scalar, int64_t divisor,
                       cudaStream_t stream) {
  bool vec = true;
  for (int j = 0; j < n; ++j) vec = vec && aligned16(in.p[j]);
  for (int o = 0; o < in.n_out; ++o) vec = vec && aligned16(in.out[o]);
  const size_t work = vec ? count / (16 / sizeof(T)) + 1 : count;
  reduce_n_kernel<T><<<grid_for(work), kThreads, 0, stream>>>(in, n, count, op, scalar_of<T>(scalar), divisor, vec);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return make_status(COLLX_ERR_SYSTEM, "launching the device reduction kernel failed: %s", cudaGetErrorString(err));
  }
  return Status::Ok();
}

}  // namespace kernels

namespace native {

Status cuda_reduce(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype, collx_op_t op,
                   void* stream) {
  if (count == 0) return Status::Ok();
  if (!dst || !a || !b) return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce: a NULL buffer for %zu elements", count);
  auto s = static_cast<cudaStream_t>(stream);
  if (datatype_is_float(datatype)) return kernels::reduce2_floating(dst, a, b, count, datatype, op, s);
  return kernels::reduce2_integer(dst, a, b, count, datatype, op, s);
}

Status cuda_reduce_n(void* const* outputs, int n_out, const void* const* inputs, int n, size_t count,
                     collx_datatype_t datatype, collx_op_t op, double scalar, int64_t divisor, void* stream) {
  if (count == 0) return Status::Ok();
  COLLX_RETURN_IF_ERROR(check_reduce_n_args(outputs, n_out, inputs, n, op, divisor));
  kernels::Inputs in{};
  for (int j = 0; j < n; ++j) in.p[j] = inputs[j];
  in.n_out = n_out;
  for (int o = 0; o < n_out; ++o) in.out[o] = outputs[o];
  auto s = static_cast<cudaStream_t>(stream);
  const int o = static_cast<int>(op);
  switch (datatype) {
    case COLLX_INT8: return kernels::launch_reduce_n<int8_t>(in, n, count, o, scalar, divisor, s);
    case COLLX_UINT8: return kernels::launch_reduce_n<uint8_t>(in, n, count, o, scalar, divisor, s);
    case COLLX_INT32: return kernels::launch_reduce_n<int32_t>(in, n, count, o, scalar, divisor, s);
    case COLLX_UINT32: return kernels::launch_reduce_n<uint32_t>(in, n, count, o, scalar, divisor, s);
    case COLLX_INT64: return kernels::launch_reduce_n<int64_t>(in, n, count, o, scalar, divisor, s);
    case COLLX_UINT64: return kernels::launch_reduce_n<uint64_t>(in, n, count, o, scalar, divisor, s);
    case COLLX_FLOAT16: return kernels::launch_reduce_n<__half>(in, n, count, o, scalar, divisor, s);
    case COLLX_BFLOAT16: return kernels::launch_reduce_n<__nv_bfloat16>(in, n, count, o, scalar, divisor, s);
    case COLLX_FLOAT32: return kernels::launch_reduce_n<float>(in, n, count, o, scalar, divisor, s);
    case COLLX_FLOAT64: return kernels::launch_reduce_n<double>(in, n, count, o, scalar, divisor, s);
    default: return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce_n: unknown datatype %d", static_cast<int>(datatype));
  }
}

}  // namespace native
}  // namespace cuda
}  // namespace collx
