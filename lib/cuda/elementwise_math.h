// The arithmetic of lib/cuda's element-wise operations (device.h: cast_scale, accumulate,
// sum_squares, nonfinite_unscale, adamw_step, sgd_step), written once for the CUDA kernels
// (elementwise.cu) and the emulated device (emu_elementwise.cc), so the emulator tests the
// arithmetic the GPU runs. Compiles with g++ (no CUDA header) and with nvcc.
//
// Every multiply, add, divide and square root is rounded on its own: nvcc would otherwise
// contract a * b + c into one fused multiply-add, whose single rounding differs from the
// host loops of parallel/ (zero_step.cc, grad_norm.cc) that these operations must match
// bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "lib/cuda/device.h"

#ifdef __CUDACC__
#define COLLX_HD __host__ __device__ __forceinline__
#else
#define COLLX_HD inline
#endif

namespace collx {
namespace cuda {
namespace math {

// The device expression in device code (the _rn intrinsics round each operation on its
// own), the host one elsewhere (g++ -std=c++17 does not contract into fused multiply-adds).
#ifdef __CUDA_ARCH__
#define COLLX_DEVICE_OR_HOST(device_expr, host_expr) (device_expr)
#else
#define COLLX_DEVICE_OR_HOST(device_expr, host_expr) (host_expr)
#endif

COLLX_HD float mul(float a, float b) { return COLLX_DEVICE_OR_HOST(__fmul_rn(a, b), a * b); }
COLLX_HD float add(float a, float b) { return COLLX_DEVICE_OR_HOST(__fadd_rn(a, b), a + b); }
COLLX_HD float sub(float a, float b) { return COLLX_DEVICE_OR_HOST(__fsub_rn(a, b), a - b); }
COLLX_HD float div(float a, float b) { return COLLX_DEVICE_OR_HOST(__fdiv_rn(a, b), a / b); }
COLLX_HD float sqrt_rn(float a) { return COLLX_DEVICE_OR_HOST(__fsqrt_rn(a), std::sqrt(a)); }
COLLX_HD double square_add(double acc, float x) {
  const double d = static_cast<double>(x);
  return COLLX_DEVICE_OR_HOST(__dadd_rn(acc, __dmul_rn(d, d)), acc + d * d);
}
COLLX_HD bool finite(float x) { return COLLX_DEVICE_OR_HOST(isfinite(x), std::isfinite(x)); }

// x * s, skipping the multiply when s == 1 (the host loops skip it too: a NaN keeps its bits).
COLLX_HD float scaled(float x, float s) { return s == 1.0f ? x : mul(x, s); }

// accumulate: dst + scale * x.
COLLX_HD float accumulated(float dst, float x, float scale) { return add(dst, scaled(x, scale)); }

// AdamW (torch.optim.AdamW; parallel/zero_step.cc adamw()) with its per-step constants.
struct AdamW {
  float lr, wd, b1, b2, eps;
  float step_size;  // lr / (1 - beta1^t), computed in double
  float bc2_sqrt;   // sqrt(1 - beta2^t), computed in double
  float grad_scale;
};
inline AdamW adamw_constants(const OptimizerStep& s) {
  const double t = static_cast<double>(s.step);
  return AdamW{static_cast<float>(s.lr),
               static_cast<float>(s.weight_decay),
               static_cast<float>(s.beta1),
               static_cast<float>(s.beta2),
               static_cast<float>(s.eps),
               static_cast<float>(s.lr / (1.0 - std::pow(s.beta1, t))),
               static_cast<float>(std::sqrt(1.0 - std::pow(s.beta2, t))),
               s.grad_scale};
}
COLLX_HD void adamw_element(float& p, float& m, float& v, float grad, const AdamW& c) {
  const float g = scaled(grad, c.grad_scale);
  if (c.wd != 0.0f) p = mul(p, sub(1.0f, mul(c.lr, c.wd)));
  m = add(mul(c.b1, m), mul(sub(1.0f, c.b1), g));
  v = add(mul(c.b2, v), mul(mul(sub(1.0f, c.b2), g), g));
  const float denom = add(div(sqrt_rn(v), c.bc2_sqrt), c.eps);
  p = sub(p, mul(c.step_size, div(m, denom)));
}

// SGD with weight decay and momentum (torch.optim.SGD; parallel/zero_step.cc sgd()).
struct Sgd {
  float lr, wd, momentum, grad_scale;
  bool first;  // step 1: the momentum buffer starts as the gradient
};
inline Sgd sgd_constants(const OptimizerStep& s) {
  return Sgd{static_cast<float>(s.lr), static_cast<float>(s.weight_decay), static_cast<float>(s.momentum),
             s.grad_scale, s.step == 1};
}
// `buf` is read and written only when c.momentum != 0.
COLLX_HD void sgd_element(float& p, float* buf, float grad, const Sgd& c) {
  float g = scaled(grad, c.grad_scale);
  if (c.wd != 0.0f) g = add(g, mul(c.wd, p));
  if (c.momentum != 0.0f) {
    *buf = c.first ? g : add(mul(c.momentum, *buf), g);
    g = *buf;
  }
  p = sub(p, mul(c.lr, g));
}

}  // namespace math
}  // namespace cuda
}  // namespace collx
