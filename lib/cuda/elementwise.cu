// Element-wise CUDA kernels of device.h (cast_scale, accumulate, sum_squares,
// nonfinite_unscale, adamw_step, sgd_step): grid-stride loops over FLOAT32 / BFLOAT16 /
// FLOAT16 elements with the arithmetic of elementwise_math.h (shared with the emulator).
// Arguments were checked by dispatch.cc (device memory, datatypes, no overlap, n > 0).
#include "lib/cuda/backends.h"
#include "lib/cuda/elementwise_math.h"
#include "lib/cuda/reduce_kernels.cuh"

namespace collx {
namespace cuda {
namespace kernels {
namespace {

template <typename T>
__device__ __forceinline__ float load(const T* p, size_t i) {
  return static_cast<float>(Num<T>::in(p[i]));
}

#define COLLX_GRID_STRIDE(i, n)                                                                          \
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                  \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

template <typename D, typename S>
__global__ void __launch_bounds__(kThreads) cast_scale_kernel(D* dst, const S* src, size_t n, float scale) {
  COLLX_GRID_STRIDE(i, n) dst[i] = Num<D>::out(math::scaled(load(src, i), scale));
}

template <typename S>
__global__ void __launch_bounds__(kThreads) accumulate_kernel(float* dst, const S* src, size_t n, float scale) {
  COLLX_GRID_STRIDE(i, n) dst[i] = math::accumulated(dst[i], load(src, i), scale);
}

// Sums kThreads doubles of shared memory in a fixed tree; thread 0 gets the total.
__device__ double block_sum(double v) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] = __dadd_rn(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  return part[0];
}

// Pass 1: one partial sum per block (each thread's grid-stride elements in order, then the
// block's tree). Pass 2 (one block): the partials in a fixed tree, added to *out. The order
// depends only on n and the grid, so a device gives the same bits every run.
template <typename S>
__global__ void __launch_bounds__(kThreads) sum_squares_kernel(const S* src, size_t n, double* partial) {
  double acc = 0;
  COLLX_GRID_STRIDE(i, n) acc = math::square_add(acc, load(src, i));
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kThreads) sum_partials_kernel(const double* partial, unsigned count, double* out) {
  double acc = 0;
  for (unsigned i = threadIdx.x; i < count; i += kThreads) acc = __dadd_rn(acc, partial[i]);
  const double total = block_sum(acc);
  if (threadIdx.x == 0) *out = __dadd_rn(*out, total);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    nonfinite_unscale_kernel(T* values, size_t n, float inv_scale, int32_t* flag) {
  bool bad = false;
  COLLX_GRID_STRIDE(i, n) {
    const float x = load(values, i);
    if (!math::finite(x)) bad = true;
    if (inv_scale != 1.0f) values[i] = Num<T>::out(math::mul(x, inv_scale));
  }
  if (bad) *flag = 1;  // every writer stores the same value
}

template <typename P>
__global__ void __launch_bounds__(kThreads) adamw_kernel(float* master, float* grad, float* exp_avg,
                                                         float* exp_avg_sq, size_t n, math::AdamW c, bool zero_grad,
                                                         P* param_out) {
  COLLX_GRID_STRIDE(i, n) {
    float p = master[i], m = exp_avg[i], v = exp_avg_sq[i];
    math::adamw_element(p, m, v, grad[i], c);
    master[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if (zero_grad) grad[i] = 0.0f;
    if (param_out) param_out[i] = Num<P>::out(p);
  }
}

template <typename P>
__global__ void __launch_bounds__(kThreads) sgd_kernel(float* master, float* grad, float* momentum_buf, size_t n,
                                                       math::Sgd c, bool zero_grad, P* param_out) {
  COLLX_GRID_STRIDE(i, n) {
    float p = master[i];
    float unused = 0.0f;
    math::sgd_element(p, momentum_buf ? &momentum_buf[i] : &unused, grad[i], c);
    master[i] = p;
    if (zero_grad) grad[i] = 0.0f;
    if (param_out) param_out[i] = Num<P>::out(p);
  }
}

#undef COLLX_GRID_STRIDE

// Calls f with a value of the element type of `dt` (FLOAT32, BFLOAT16 or FLOAT16).
template <typename F>
Status with_type(collx_datatype_t dt, F&& f) {
  switch (dt) {
    case COLLX_BFLOAT16: return f(__nv_bfloat16{});
    case COLLX_FLOAT16: return f(__half{});
    default: return f(float{});
  }
}

Status launched(const char* what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return make_status(COLLX_ERR_SYSTEM, "launching %s failed: %s", what, cudaGetErrorString(err));
  return Status::Ok();
}

}  // namespace
}  // namespace kernels

namespace native {

using kernels::grid_for;
using kernels::kThreads;
using kernels::launched;
using kernels::with_type;

Status cast_scale(void* dst, collx_datatype_t dst_dtype, const void* src, collx_datatype_t src_dtype, size_t n,
                  float scale, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  return with_type(dst_dtype, [&](auto d) {
    using D = decltype(d);
    return with_type(src_dtype, [&](auto x) {
      using S = decltype(x);
      kernels::cast_scale_kernel<D, S>
          <<<grid_for(n), kThreads, 0, s>>>(static_cast<D*>(dst), static_cast<const S*>(src), n, scale);
      return launched("the cast_scale kernel");
    });
  });
}

Status accumulate(float* dst, const void* src, collx_datatype_t src_dtype, size_t n, float scale, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  return with_type(src_dtype, [&](auto x) {
    using S = decltype(x);
    kernels::accumulate_kernel<S><<<grid_for(n), kThreads, 0, s>>>(dst, static_cast<const S*>(src), n, scale);
    return launched("the accumulate kernel");
  });
}

// The partials live in stream-ordered scratch (cudaMallocAsync), freed after pass 2 on the
// same stream, so concurrent calls on different streams never share it.
Status sum_squares(const void* src, collx_datatype_t dtype, size_t n, double* dev_out, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = grid_for(n);
  double* partial = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&partial), blocks * sizeof(double), s);
  if (err != cudaSuccess) {
    return make_status(COLLX_ERR_NO_MEMORY, "sum_squares: %u doubles of device scratch: %s", blocks,
                       cudaGetErrorString(err));
  }
  Status st = with_type(dtype, [&](auto x) {
    using S = decltype(x);
    kernels::sum_squares_kernel<S><<<blocks, kThreads, 0, s>>>(static_cast<const S*>(src), n, partial);
    COLLX_RETURN_IF_ERROR(launched("the sum_squares kernel"));
    kernels::sum_partials_kernel<<<1, kThreads, 0, s>>>(partial, blocks, dev_out);
    return launched("the sum_squares final kernel");
  });
  (void)cudaFreeAsync(partial, s);  // queued after the kernels; an error would show in their status
  return st;
}

Status nonfinite_unscale(void* values, collx_datatype_t dtype, size_t n, float inv_scale, int32_t* dev_flag,
                         void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  return with_type(dtype, [&](auto x) {
    using T = decltype(x);
    kernels::nonfinite_unscale_kernel<T><<<grid_for(n), kThreads, 0, s>>>(static_cast<T*>(values), n, inv_scale,
                                                                          dev_flag);
    return launched("the nonfinite_unscale kernel");
  });
}

Status adamw_step(float* master, float* grad, float* exp_avg, float* exp_avg_sq, size_t n, const OptimizerStep& st,
                  void* param_out, collx_datatype_t param_dtype, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const math::AdamW c = math::adamw_constants(st);
  return with_type(param_out ? param_dtype : COLLX_FLOAT32, [&](auto x) {
    using P = decltype(x);
    kernels::adamw_kernel<P><<<grid_for(n), kThreads, 0, s>>>(master, grad, exp_avg, exp_avg_sq, n, c, st.zero_grad,
                                                              static_cast<P*>(param_out));
    return launched("the adamw_step kernel");
  });
}

Status sgd_step(float* master, float* grad, float* momentum_buf, size_t n, const OptimizerStep& st, void* param_out,
                collx_datatype_t param_dtype, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const math::Sgd c = math::sgd_constants(st);
  return with_type(param_out ? param_dtype : COLLX_FLOAT32, [&](auto x) {
    using P = decltype(x);
    kernels::sgd_kernel<P><<<grid_for(n), kThreads, 0, s>>>(master, grad, momentum_buf, n, c, st.zero_grad,
                                                            static_cast<P*>(param_out));
    return launched("the sgd_step kernel");
  });
}

}  // namespace native
}  // namespace cuda
}  // namespace collx
