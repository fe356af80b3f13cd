// Device reduction kernels shared by the .cu files of lib/cuda (each file instantiates a few
// datatypes, so the CUDA build stays parallel and cheap). Semantics follow the host kernels
// (lib/dtype/datatype.h): integers wrap, float16/bfloat16 compute in float32 and round once,
// MIN/MAX return the second operand when the comparison is false (NaN, +0 vs -0).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "lib/cuda/device.h"

namespace collx {
namespace cuda {
namespace kernels {

// The arithmetic type of a datatype and the conversions to and from it.
template <typename T>
struct Num {
  using Acc = T;
  static __device__ __forceinline__ Acc in(T v) { return v; }
  static __device__ __forceinline__ T out(Acc v) { return v; }
};
template <>
struct Num<__half> {
  using Acc = float;
  static __device__ __forceinline__ float in(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half out(float v) { return __float2half_rn(v); }
};
template <>
struct Num<__nv_bfloat16> {
  using Acc = float;
  static __device__ __forceinline__ float in(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
};

// Integer SUM and PROD wrap: computed on the unsigned type of the same width.
template <typename A>
__device__ __forceinline__ A wrap_add(A a, A b) {
  if constexpr (std::is_integral<A>::value) {
    using U = typename std::make_unsigned<A>::type;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename A>
__device__ __forceinline__ A wrap_mul(A a, A b) {
  if constexpr (std::is_integral<A>::value) {
    using U = typename std::make_unsigned<A>::type;
    using W = typename std::conditional<(sizeof(U) < sizeof(unsigned)), unsigned, U>::type;
    return static_cast<A>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

struct OpSum {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return wrap_add(a, b); }
};
struct OpProd {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return wrap_mul(a, b); }
};
struct OpMin {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return a < b ? a : b; }
};
struct OpMax {
  template <typename A>
  static __device__ __forceinline__ A apply(A a, A b) { return a > b ? a : b; }
};

constexpr int kThreads = 512;

// Blocks for `work` items of kThreads each, capped at a few resident blocks per SM (the loops
// are grid-stride, so the cap only bounds the launch).
unsigned grid_for(size_t work);

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// dst = a OP b, 16-byte vectors when `vec`, then the tail element by element.
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreads) reduce2_kernel(T* dst, const T* a, const T* b, size_t n, bool vec) {
  using N = Num<T>;
  constexpr int V = 16 / sizeof(T);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t done = 0;
  if (vec) {
    const size_t nv = n / V;
    const uint4* va = reinterpret_cast<const uint4*>(a);
    const uint4* vb = reinterpret_cast<const uint4*>(b);
    uint4* vd = reinterpret_cast<uint4*>(dst);
    for (size_t i = tid; i < nv; i += stride) {
      uint4 x = va[i];
      uint4 y = vb[i];
      uint4 r;
      const T* px = reinterpret_cast<const T*>(&x);
      const T* py = reinterpret_cast<const T*>(&y);
      T* pr = reinterpret_cast<T*>(&r);
#pragma unroll
      for (int k = 0; k < V; ++k) pr[k] = N::out(Op::apply(N::in(px[k]), N::in(py[k])));
      vd[i] = r;
    }
    done = nv * V;
  }
  for (size_t i = done + tid; i < n; i += stride) dst[i] = N::out(Op::apply(N::in(a[i]), N::in(b[i])));
}

template <typename T, typename Op>
Status launch_reduce2(void* dst, const void* a, const void* b, size_t count, cudaStream_t stream) {
  const bool vec = aligned16(dst) && aligned16(a) && aligned16(b);
  const size_t work = vec ? count / (16 / sizeof(T)) + 1 : count;
  reduce2_kernel<T, Op><<<grid_for(work), kThreads, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(a),
                                                                 static_cast<const T*>(b), count, vec);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return make_status(COLLX_ERR_SYSTEM, "launching the device reduction kernel failed: %s", cudaGetErrorString(err));
  }
  return Status::Ok();
}

template <typename T>
Status launch_reduce2_op(void* dst, const void* a, const void* b, size_t count, collx_op_t op, cudaStream_t stream) {
  switch (op) {
    case COLLX_SUM: return launch_reduce2<T, OpSum>(dst, a, b, count, stream);
    case COLLX_PROD: return launch_reduce2<T, OpProd>(dst, a, b, count, stream);
    case COLLX_MIN: return launch_reduce2<T, OpMin>(dst, a, b, count, stream);
    case COLLX_MAX: return launch_reduce2<T, OpMax>(dst, a, b, count, stream);
    default:
      return make_status(COLLX_ERR_INVALID_ARG, "cuda_reduce: op %d is not SUM, PROD, MIN or MAX (AVG and "
                         "PREMUL_SUM go through cuda_reduce_n)", static_cast<int>(op));
  }
}

// Per-datatype-family entry points (one .cu file each).
Status reduce2_integer(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype,
                       collx_op_t op, cudaStream_t stream);
Status reduce2_floating(void* dst, const void* a, const void* b, size_t count, collx_datatype_t datatype,
                        collx_op_t op, cudaStream_t stream);

}  // namespace kernels
}  // namespace cuda
}  // namespace collx
