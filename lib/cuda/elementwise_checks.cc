// Argument checks of the element-wise device operations (elementwise_checks.h).
#include "lib/cuda/elementwise_checks.h"

#include <cmath>
#include <initializer_list>

#include "lib/dtype/datatype.h"

namespace collx {
namespace cuda {
namespace {

// One buffer argument of an operation: its name, address and extent in bytes.
struct Arg {
  const char* name;
  const void* ptr;
  size_t bytes;
};

Status check_dtype(const char* fn, const char* what, collx_datatype_t dt) {
  if (dt == COLLX_FLOAT32 || dt == COLLX_BFLOAT16 || dt == COLLX_FLOAT16) return Status::Ok();
  return make_status(COLLX_ERR_INVALID_ARG, "%s: %s %d (%s) is not FLOAT32, BFLOAT16 or FLOAT16", fn, what,
                     static_cast<int>(dt), datatype_valid(dt) ? datatype_name(dt) : "unknown");
}

bool overlap(const Arg& a, const Arg& b) {
  const auto a0 = reinterpret_cast<uintptr_t>(a.ptr), b0 = reinterpret_cast<uintptr_t>(b.ptr);
  return a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

// Each argument is device memory; no two overlap (exact aliases are checked by the caller).
Status check_buffers(const char* fn, std::initializer_list<Arg> args) {
  for (const Arg& a : args) {
    if (!a.ptr) return make_status(COLLX_ERR_INVALID_ARG, "%s: %s is NULL", fn, a.name);
    if (pointer_kind(a.ptr) != COLLX_MEM_CUDA) {
      return make_status(COLLX_ERR_INVALID_ARG, "%s: %s (%p) is not device memory", fn, a.name, a.ptr);
    }
  }
  for (auto i = args.begin(); i != args.end(); ++i) {
    for (auto j = i + 1; j != args.end(); ++j) {
      if (overlap(*i, *j)) return make_status(COLLX_ERR_INVALID_ARG, "%s: %s overlaps %s", fn, i->name, j->name);
    }
  }
  return Status::Ok();
}

Status check_step(const char* fn, const OptimizerStep& s) {
  if (s.step < 1) return make_status(COLLX_ERR_INVALID_ARG, "%s: step %lld < 1", fn, static_cast<long long>(s.step));
  if (!std::isfinite(s.grad_scale)) return make_status(COLLX_ERR_INVALID_ARG, "%s: grad_scale is not finite", fn);
  return Status::Ok();
}

}  // namespace

Status check_cast_scale(void* dst, collx_datatype_t dst_dtype, const void* src, collx_datatype_t src_dtype, size_t n) {
  const char* fn = "cast_scale";
  COLLX_RETURN_IF_ERROR(check_dtype(fn, "dst_dtype", dst_dtype));
  COLLX_RETURN_IF_ERROR(check_dtype(fn, "src_dtype", src_dtype));
  const Arg d{"dst", dst, n * datatype_size(dst_dtype)}, s{"src", src, n * datatype_size(src_dtype)};
  if (dst == src && dst_dtype == src_dtype) return check_buffers(fn, {d});  // in place
  return check_buffers(fn, {d, s});
}

Status check_accumulate(float* dst, const void* src, collx_datatype_t src_dtype, size_t n) {
  COLLX_RETURN_IF_ERROR(check_dtype("accumulate", "src_dtype", src_dtype));
  return check_buffers("accumulate", {{"dst", dst, n * 4}, {"src", src, n * datatype_size(src_dtype)}});
}

Status check_sum_squares(const void* src, collx_datatype_t dtype, size_t n, double* dev_out) {
  COLLX_RETURN_IF_ERROR(check_dtype("sum_squares", "dtype", dtype));
  return check_buffers("sum_squares", {{"src", src, n * datatype_size(dtype)}, {"dev_out", dev_out, 8}});
}

Status check_nonfinite_unscale(void* values, collx_datatype_t dtype, size_t n, int32_t* dev_flag) {
  COLLX_RETURN_IF_ERROR(check_dtype("nonfinite_unscale", "dtype", dtype));
  return check_buffers("nonfinite_unscale", {{"values", values, n * datatype_size(dtype)}, {"dev_flag", dev_flag, 4}});
}

Status check_adamw_step(float* master, float* grad, float* exp_avg, float* exp_avg_sq, size_t n,
                        const OptimizerStep& s, void* param_out, collx_datatype_t param_dtype) {
  const char* fn = "adamw_step";
  COLLX_RETURN_IF_ERROR(check_step(fn, s));
  const Arg m{"master", master, n * 4}, g{"grad", grad, n * 4}, a{"exp_avg", exp_avg, n * 4},
      q{"exp_avg_sq", exp_avg_sq, n * 4};
  if (!param_out) return check_buffers(fn, {m, g, a, q});
  COLLX_RETURN_IF_ERROR(check_dtype(fn, "param_dtype", param_dtype));
  return check_buffers(fn, {m, g, a, q, {"param_out", param_out, n * datatype_size(param_dtype)}});
}

Status check_sgd_step(float* master, float* grad, float* momentum_buf, size_t n, const OptimizerStep& s,
                      void* param_out, collx_datatype_t param_dtype) {
  const char* fn = "sgd_step";
  COLLX_RETURN_IF_ERROR(check_step(fn, s));
  const Arg m{"master", master, n * 4}, g{"grad", grad, n * 4}, b{"momentum_buf", momentum_buf, n * 4};
  if (s.momentum == 0 && momentum_buf) {
    return make_status(COLLX_ERR_INVALID_ARG, "sgd_step: momentum_buf given with momentum 0 (pass NULL)");
  }
  if (param_out) {
    COLLX_RETURN_IF_ERROR(check_dtype(fn, "param_dtype", param_dtype));
    const Arg p{"param_out", param_out, n * datatype_size(param_dtype)};
    return s.momentum != 0 ? check_buffers(fn, {m, g, b, p}) : check_buffers(fn, {m, g, p});
  }
  return s.momentum != 0 ? check_buffers(fn, {m, g, b}) : check_buffers(fn, {m, g});
}

Status check_copy2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows) {
  if (width > dpitch || width > spitch) {
    return make_status(COLLX_ERR_INVALID_ARG, "copy2d_async: width %zu exceeds a pitch (dst %zu, src %zu)", width,
                       dpitch, spitch);
  }
  if (rows && width && (!dst || !src)) return make_status(COLLX_ERR_INVALID_ARG, "copy2d_async: dst or src is NULL");
  return Status::Ok();
}

}  // namespace cuda
}  // namespace collx
