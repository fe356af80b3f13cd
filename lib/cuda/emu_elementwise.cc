// The element-wise "kernels" of the emulated device (device.h: cast_scale ... sgd_step): the
// arithmetic of elementwise_math.h, the same the CUDA kernels run, applied on the stream's
// worker over the emulator's aliases. Loops go in index order, so sum_squares equals the host
// loop's sum exactly. Arguments were checked by dispatch.cc; resolve() still refuses a range
// that is not inside one live allocation.
#include <cstring>

#include "lib/cuda/backends.h"
#include "lib/cuda/elementwise_math.h"
#include "lib/cuda/emu_memory.h"
#include "lib/cuda/emu_stream.h"
#include "lib/dtype/datatype.h"

namespace collx {
namespace cuda {
namespace emu {

namespace {

// Element i of a FLOAT32 / BFLOAT16 / FLOAT16 array as float32, and its rounded store.
float load(const char* p, collx_datatype_t dt, size_t i) {
  if (dt == COLLX_FLOAT32) {
    float f;
    std::memcpy(&f, p + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + i * 2, 2);
  return dt == COLLX_BFLOAT16 ? bfloat16_to_float(h) : half_to_float(h);
}

void store(char* p, collx_datatype_t dt, size_t i, float v) {
  if (dt == COLLX_FLOAT32) {
    std::memcpy(p + i * 4, &v, 4);
    return;
  }
  const uint16_t h = dt == COLLX_BFLOAT16 ? float_to_bfloat16(v) : float_to_half(v);
  std::memcpy(p + i * 2, &h, 2);
}

float* floats(const Resolved& r) { return reinterpret_cast<float*>(r.alias); }

}  // namespace

Status cast_scale(void* dst, collx_datatype_t dst_dtype, const void* src, collx_datatype_t src_dtype, size_t n,
                  float scale, void* stream) {
  Resolved d, s;
  COLLX_RETURN_IF_ERROR(resolve(dst, n * datatype_size(dst_dtype), "cast_scale (dst)", &d));
  COLLX_RETURN_IF_ERROR(resolve(src, n * datatype_size(src_dtype), "cast_scale (src)", &s));
  return enqueue(stream, "cast_scale", [d, s, dst_dtype, src_dtype, n, scale] {
    for (size_t i = 0; i < n; ++i) store(d.alias, dst_dtype, i, math::scaled(load(s.alias, src_dtype, i), scale));
    return Status::Ok();
  });
}

Status accumulate(float* dst, const void* src, collx_datatype_t src_dtype, size_t n, float scale, void* stream) {
  Resolved d, s;
  COLLX_RETURN_IF_ERROR(resolve(dst, n * 4, "accumulate (dst)", &d));
  COLLX_RETURN_IF_ERROR(resolve(src, n * datatype_size(src_dtype), "accumulate (src)", &s));
  return enqueue(stream, "accumulate", [d, s, src_dtype, n, scale] {
    float* out = floats(d);
    for (size_t i = 0; i < n; ++i) out[i] = math::accumulated(out[i], load(s.alias, src_dtype, i), scale);
    return Status::Ok();
  });
}

Status sum_squares(const void* src, collx_datatype_t dtype, size_t n, double* dev_out, void* stream) {
  Resolved s, o;
  COLLX_RETURN_IF_ERROR(resolve(src, n * datatype_size(dtype), "sum_squares (src)", &s));
  COLLX_RETURN_IF_ERROR(resolve(dev_out, sizeof(double), "sum_squares (dev_out)", &o));
  return enqueue(stream, "sum_squares", [s, o, dtype, n] {
    double acc = 0;
    for (size_t i = 0; i < n; ++i) acc = math::square_add(acc, load(s.alias, dtype, i));
    double out;
    std::memcpy(&out, o.alias, sizeof out);
    out += acc;
    std::memcpy(o.alias, &out, sizeof out);
    return Status::Ok();
  });
}

Status nonfinite_unscale(void* values, collx_datatype_t dtype, size_t n, float inv_scale, int32_t* dev_flag,
                         void* stream) {
  Resolved v, f;
  COLLX_RETURN_IF_ERROR(resolve(values, n * datatype_size(dtype), "nonfinite_unscale (values)", &v));
  COLLX_RETURN_IF_ERROR(resolve(dev_flag, sizeof(int32_t), "nonfinite_unscale (dev_flag)", &f));
  return enqueue(stream, "nonfinite_unscale", [v, f, dtype, n, inv_scale] {
    bool bad = false;
    for (size_t i = 0; i < n; ++i) {
      const float x = load(v.alias, dtype, i);
      if (!math::finite(x)) bad = true;
      if (inv_scale != 1.0f) store(v.alias, dtype, i, math::mul(x, inv_scale));
    }
    if (bad) {
      const int32_t one = 1;
      std::memcpy(f.alias, &one, sizeof one);
    }
    return Status::Ok();
  });
}

namespace {

// The optional rounded parameter copy of an optimizer step.
struct ParamOut {
  Resolved r;
  collx_datatype_t dtype = COLLX_FLOAT32;
};

Status resolve_param_out(void* param_out, collx_datatype_t dt, size_t n, const char* what, ParamOut* out) {
  out->dtype = dt;
  if (!param_out) return Status::Ok();
  return resolve(param_out, n * datatype_size(dt), what, &out->r);
}

void write_param(const ParamOut& p, size_t i, float v) {
  if (p.r.alias) store(p.r.alias, p.dtype, i, v);
}

}  // namespace

Status adamw_step(float* master, float* grad, float* exp_avg, float* exp_avg_sq, size_t n, const OptimizerStep& s,
                  void* param_out, collx_datatype_t param_dtype, void* stream) {
  Resolved m, g, a, q;
  ParamOut p;
  COLLX_RETURN_IF_ERROR(resolve(master, n * 4, "adamw_step (master)", &m));
  COLLX_RETURN_IF_ERROR(resolve(grad, n * 4, "adamw_step (grad)", &g));
  COLLX_RETURN_IF_ERROR(resolve(exp_avg, n * 4, "adamw_step (exp_avg)", &a));
  COLLX_RETURN_IF_ERROR(resolve(exp_avg_sq, n * 4, "adamw_step (exp_avg_sq)", &q));
  COLLX_RETURN_IF_ERROR(resolve_param_out(param_out, param_dtype, n, "adamw_step (param_out)", &p));
  const math::AdamW c = math::adamw_constants(s);
  const bool zero_grad = s.zero_grad;
  return enqueue(stream, "adamw_step", [m, g, a, q, p, c, zero_grad, n] {
    for (size_t i = 0; i < n; ++i) {
      math::adamw_element(floats(m)[i], floats(a)[i], floats(q)[i], floats(g)[i], c);
      if (zero_grad) floats(g)[i] = 0.0f;
      write_param(p, i, floats(m)[i]);
    }
    return Status::Ok();
  });
}

Status sgd_step(float* master, float* grad, float* momentum_buf, size_t n, const OptimizerStep& s, void* param_out,
                collx_datatype_t param_dtype, void* stream) {
  Resolved m, g, b;
  ParamOut p;
  COLLX_RETURN_IF_ERROR(resolve(master, n * 4, "sgd_step (master)", &m));
  COLLX_RETURN_IF_ERROR(resolve(grad, n * 4, "sgd_step (grad)", &g));
  if (momentum_buf) COLLX_RETURN_IF_ERROR(resolve(momentum_buf, n * 4, "sgd_step (momentum_buf)", &b));
  COLLX_RETURN_IF_ERROR(resolve_param_out(param_out, param_dtype, n, "sgd_step (param_out)", &p));
  const math::Sgd c = math::sgd_constants(s);
  const bool zero_grad = s.zero_grad;
  return enqueue(stream, "sgd_step", [m, g, b, p, c, zero_grad, n] {
    float unused = 0.0f;
    for (size_t i = 0; i < n; ++i) {
      math::sgd_element(floats(m)[i], b.alias ? &floats(b)[i] : &unused, floats(g)[i], c);
      if (zero_grad) floats(g)[i] = 0.0f;
      write_param(p, i, floats(m)[i]);
    }
    return Status::Ok();
  });
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
