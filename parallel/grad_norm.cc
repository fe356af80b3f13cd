// Overflow flag and global gradient norm: each element of the model counted exactly once
// (no padding, no TP-replicated copies, shards summed over their owners). Device buffers:
// the same sums and scans as device kernels on the thread's current parallel stream; the
// host waits only when it must read the result (a host `found` or `sumsq`).
#include <algorithm>
#include <cmath>

#include "parallel/device_buffers.h"
#include "parallel/free_calls.h"
#include "parallel/norm_rules.h"
#include "parallel/parallel_internal.h"

namespace collx {
namespace parallel {
namespace {

double sum_sq(const float* p, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(p[i]) * static_cast<double>(p[i]);
  return s;
}

// Calls range(buffer offset, count) for each part of the model the norm counts, in
// layout order; stops at range's first error.
template <typename Range>
collx_status_t for_each_counted(collx_layout_t l, int32_t owner, int32_t tp_rank, int32_t shared, Range&& range) {
  if (!l->finalized)
    return layout_fail(l, COLLX_ERR_INVALID_USAGE, "collx_norm_sq_local: the layout is not finalized");
  if (owner >= l->config.dp_size)
    return layout_fail(l, COLLX_ERR_INVALID_ARG,
                       "collx_norm_sq_local: owner_rank " + std::to_string(owner) + " >= dp_size " +
                           std::to_string(l->config.dp_size));
  for (const auto& t : l->tensors) {
    if (!counts_in_norm(t.flags, tp_rank, shared)) continue;
    size_t toff = 0, boff = t.offset, n = t.numel;
    collx_status_t st = owner < 0 ? COLLX_OK : collx_layout_tensor_shard(l, t.id, owner, &toff, &boff, &n);
    if (st == COLLX_OK) st = range(boff, n);
    if (st != COLLX_OK) return st;
  }
  return COLLX_OK;
}

collx_status_t norm_sq(collx_layout_t l, const float* buffer, int32_t owner, int32_t tp_rank, int32_t shared,
                       double* out) {
  double s = 0;
  collx_status_t st = for_each_counted(l, owner, tp_rank, shared, [&](size_t off, size_t n) {
    s += sum_sq(buffer + off, n);
    return COLLX_OK;
  });
  if (st == COLLX_OK) *out = s;
  return st;
}

// A device value for a result the caller wants at `out`: `out` itself when it is device
// memory (nothing waits), else the thread's device workspace (on the device of `near`),
// copied back to `out` by finish(), which waits.
class DeviceResult {
 public:
  DeviceResult(const char* fn, void* out, size_t bytes, const void* near)
      : fn_(fn), out_(out), bytes_(bytes), near_(near) {}
  ~DeviceResult() {
    if (in_use_) ws_.done(fn_);  // a failed call: later uses still wait for its queued work
  }
  collx_status_t init() {
    if (is_device(out_)) {
      dev_ = out_;
    } else {
      char* w = nullptr;
      collx_status_t st = ws_.acquire(fn_, near_, bytes_, &w);
      if (st != COLLX_OK) return st;
      dev_ = w;
      in_use_ = true;
    }
    return dev_zero(fn_, dev_, bytes_);
  }
  void* get() const { return dev_; }
  collx_status_t finish() {
    if (!in_use_) return COLLX_OK;
    collx_status_t st = dev_copy(fn_, out_, dev_, bytes_, Dir::kDeviceToHost);
    const collx_status_t d = ws_.done(fn_);
    in_use_ = false;
    if (st == COLLX_OK) st = d;
    return st == COLLX_OK ? dev_wait(fn_) : st;
  }

 private:
  const char* fn_;
  void* out_;
  size_t bytes_;
  const void* near_;
  void* dev_ = nullptr;
  bool in_use_ = false;
  Workspace ws_;
};

collx_status_t norm_sq_device(collx_layout_t l, const float* buffer, int32_t owner, int32_t tp_rank, int32_t shared,
                              double* out) {
  const char* fn = "collx_norm_sq_local";
  DeviceResult sum(fn, out, sizeof(double), buffer);
  collx_status_t st = sum.init();
  if (st == COLLX_OK)
    st = for_each_counted(l, owner, tp_rank, shared, [&](size_t off, size_t n) {
      return dev_sum_squares(fn, buffer + off, n, static_cast<double*>(sum.get()));
    });
  return st == COLLX_OK ? sum.finish() : st;
}

collx_status_t found_nonfinite_device(float* values, size_t n, float inv_scale, int32_t* found) {
  const char* fn = "collx_found_nonfinite";
  DeviceResult flag(fn, found, sizeof(int32_t), values);
  collx_status_t st = flag.init();
  if (st == COLLX_OK) st = dev_nonfinite_unscale(fn, values, n, inv_scale, static_cast<int32_t*>(flag.get()));
  return st == COLLX_OK ? flag.finish() : st;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

extern "C" {

COLLX_API collx_status_t collx_found_nonfinite(float* values, size_t n, float inv_scale, int32_t* found) {
  if (!found || (!values && n))
    return collx::parallel::refuse_arg(nullptr, "collx_found_nonfinite", "found is NULL or values is NULL with n > 0");
  namespace p = collx::parallel;
  // Device values or a device flag: the device path (host values with a device flag are
  // refused there, naming values).
  if (p::is_device(values) || p::is_device(found))
    return p::free_call("collx_found_nonfinite", [&] { return p::found_nonfinite_device(values, n, inv_scale, found); });
  int32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) bad = 1;
    if (inv_scale != 1.0f) values[i] *= inv_scale;
  }
  *found = bad;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_flag_any(int32_t* flag, collx_comm_t comm) {
  if (!flag || !comm) return collx::parallel::free_fail(COLLX_ERR_INVALID_ARG, "collx_flag_any: flag or comm is NULL");
  namespace p = collx::parallel;
  // A device flag (from collx_found_nonfinite): read back on the current stream (the host
  // needs the decision anyway: collx_scaler_update takes it), reduced, written back.
  const bool device = p::is_device(flag);
  int32_t v = 0;
  collx_status_t st = COLLX_OK;
  if (device) {
    st = p::dev_copy("collx_flag_any", &v, flag, sizeof v, p::Dir::kDeviceToHost);
    if (st == COLLX_OK) st = p::dev_wait("collx_flag_any");
    if (st != COLLX_OK) return st;
  } else {
    v = *flag;
  }
  v = v ? 1 : 0;
  st = collx_allreduce(&v, &v, 1, COLLX_INT32, COLLX_MAX, comm, nullptr);
  if (st != COLLX_OK) return p::comm_fail(comm, st, "collx_flag_any");
  if (!device) {
    *flag = v;
    return COLLX_OK;
  }
  st = p::dev_copy("collx_flag_any", flag, &v, sizeof v, p::Dir::kHostToDevice);
  return st == COLLX_OK ? p::dev_wait("collx_flag_any") : st;  // v is on this stack
}

COLLX_API collx_status_t collx_norm_sq_local(collx_layout_t layout, const float* buffer, int32_t owner_rank,
                                             int32_t tp_rank, int32_t count_shared, double* sumsq) {
  if (!layout) return collx::parallel::refuse_arg(layout, "collx_norm_sq_local", "layout is NULL");
  if (!buffer || !sumsq)
    return collx::parallel::layout_fail(layout, COLLX_ERR_INVALID_ARG, "collx_norm_sq_local: buffer or sumsq is NULL");
  return collx::parallel::guarded(
      [&] {
        return collx::parallel::is_device(buffer)
                   ? collx::parallel::norm_sq_device(layout, buffer, owner_rank, tp_rank, count_shared, sumsq)
                   : collx::parallel::norm_sq(layout, buffer, owner_rank, tp_rank, count_shared, sumsq);
      },
      [&](const std::string& m) { collx::parallel::layout_fail(layout, COLLX_OK, "collx_norm_sq_local: " + m); });
}

COLLX_API collx_status_t collx_global_norm(double local_sumsq, double* norm, collx_comm_t comm) {
  if (!norm) return collx::parallel::free_fail(COLLX_ERR_INVALID_ARG, "collx_global_norm: norm is NULL");
  double v = local_sumsq;
  if (comm) {
    collx_status_t st = collx_allreduce(&v, &v, 1, COLLX_FLOAT64, COLLX_SUM, comm, nullptr);
    if (st != COLLX_OK) return collx::parallel::comm_fail(comm, st, "collx_global_norm");
  }
  *norm = std::sqrt(v);
  return COLLX_OK;
}

COLLX_API collx_status_t collx_clip_coef(double norm, double max_norm, double* coef) {
  if (!coef) return collx::parallel::refuse_arg(nullptr, "collx_clip_coef", "coef is NULL");
  double c = 1.0;
  if (max_norm > 0) c = std::min(1.0, max_norm / (norm + 1e-6));
  *coef = c;
  return COLLX_OK;
}

}  // extern "C"
