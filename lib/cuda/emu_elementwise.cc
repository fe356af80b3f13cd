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

namespace {

// A [n x v_local] buffer of a cross-entropy step (nothing to resolve when v_local == 0).
Status resolve_rows(const void* p, size_t n, size_t v_local, const char* what, Resolved* out) {
  return v_local ? resolve(p, n * v_local * 4, what, out) : Status::Ok();
}

const float* row_of(const Resolved& r, size_t i, size_t v_local) { return floats(r) + i * v_local; }
const int64_t* int64s(const Resolved& r) { return reinterpret_cast<const int64_t*>(r.alias); }

}  // namespace

Status ce_row_max(const float* logits, size_t n, size_t v_local, float* row_max, void* stream) {
  Resolved l, m;
  COLLX_RETURN_IF_ERROR(resolve_rows(logits, n, v_local, "ce_row_max (logits)", &l));
  COLLX_RETURN_IF_ERROR(resolve(row_max, n * 4, "ce_row_max (row_max)", &m));
  return enqueue(stream, "ce_row_max", [l, m, n, v_local] {
    for (size_t i = 0; i < n; ++i) floats(m)[i] = math::row_max(row_of(l, i, v_local), v_local);
    return Status::Ok();
  });
}

Status ce_target_sum_exp(const float* logits, const int64_t* targets, size_t n, size_t v_local, int64_t vocab_start,
                         const float* row_max, float* target_logit, float* sum_exp, void* stream) {
  Resolved l, t, m, tl, se;
  COLLX_RETURN_IF_ERROR(resolve_rows(logits, n, v_local, "ce_target_sum_exp (logits)", &l));
  COLLX_RETURN_IF_ERROR(resolve(targets, n * 8, "ce_target_sum_exp (targets)", &t));
  COLLX_RETURN_IF_ERROR(resolve(row_max, n * 4, "ce_target_sum_exp (row_max)", &m));
  COLLX_RETURN_IF_ERROR(resolve(target_logit, n * 4, "ce_target_sum_exp (target_logit)", &tl));
  COLLX_RETURN_IF_ERROR(resolve(sum_exp, n * 4, "ce_target_sum_exp (sum_exp)", &se));
  return enqueue(stream, "ce_target_sum_exp", [l, t, m, tl, se, n, v_local, vocab_start] {
    for (size_t i = 0; i < n; ++i) {
      const float max = floats(m)[i];
      const int64_t local = int64s(t)[i] - vocab_start;
      const bool mine = local >= 0 && local < static_cast<int64_t>(v_local);
      floats(tl)[i] = mine ? math::sub(row_of(l, i, v_local)[local], max) : 0.0f;
      floats(se)[i] = v_local ? math::row_sum_exp(row_of(l, i, v_local), v_local, max) : 0.0f;
    }
    return Status::Ok();
  });
}

Status ce_loss_softmax(const float* logits, size_t n, size_t v_local, const float* row_max, const float* target_logit,
                       const float* sum_exp, float* loss, float* softmax, void* stream) {
  Resolved l, m, tl, se, o, sm;
  COLLX_RETURN_IF_ERROR(resolve_rows(logits, n, v_local, "ce_loss_softmax (logits)", &l));
  COLLX_RETURN_IF_ERROR(resolve(row_max, n * 4, "ce_loss_softmax (row_max)", &m));
  COLLX_RETURN_IF_ERROR(resolve(target_logit, n * 4, "ce_loss_softmax (target_logit)", &tl));
  COLLX_RETURN_IF_ERROR(resolve(sum_exp, n * 4, "ce_loss_softmax (sum_exp)", &se));
  COLLX_RETURN_IF_ERROR(resolve(loss, n * 4, "ce_loss_softmax (loss)", &o));
  if (softmax) COLLX_RETURN_IF_ERROR(resolve_rows(softmax, n, v_local, "ce_loss_softmax (softmax)", &sm));
  return enqueue(stream, "ce_loss_softmax", [l, m, tl, se, o, sm, n, v_local] {
    for (size_t i = 0; i < n; ++i) {
      floats(o)[i] = math::ce_loss(floats(se)[i], floats(tl)[i]);
      if (!sm.alias) continue;
      for (size_t j = 0; j < v_local; ++j)
        floats(sm)[i * v_local + j] = math::ce_softmax(row_of(l, i, v_local)[j], floats(m)[i], floats(se)[i]);
    }
    return Status::Ok();
  });
}

Status ce_backward(const float* softmax, const int64_t* targets, const float* dloss, size_t n, size_t v_local,
                   int64_t vocab_start, float* dlogits, void* stream) {
  Resolved sm, t, d, g;
  COLLX_RETURN_IF_ERROR(resolve_rows(softmax, n, v_local, "ce_backward (softmax)", &sm));
  COLLX_RETURN_IF_ERROR(resolve(targets, n * 8, "ce_backward (targets)", &t));
  COLLX_RETURN_IF_ERROR(resolve(dloss, n * 4, "ce_backward (dloss)", &d));
  COLLX_RETURN_IF_ERROR(resolve_rows(dlogits, n, v_local, "ce_backward (dlogits)", &g));
  return enqueue(stream, "ce_backward", [sm, t, d, g, n, v_local, vocab_start] {
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < v_local; ++j)
        floats(g)[i * v_local + j] = math::ce_grad(floats(sm)[i * v_local + j],
                                                   vocab_start + static_cast<int64_t>(j) == int64s(t)[i], floats(d)[i]);
    return Status::Ok();
  });
}

}  // namespace emu
}  // namespace cuda
}  // namespace collx
