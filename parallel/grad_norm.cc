// Overflow flag and global gradient norm: each element of the model counted exactly once
// (no padding, no TP-replicated copies, shards summed over their owners).
#include <algorithm>
#include <cmath>

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

collx_status_t norm_sq(collx_layout_t l, const float* buffer, int32_t owner, int32_t tp_rank, int32_t shared,
                       double* out) {
  if (!l->finalized)
    return layout_fail(l, COLLX_ERR_INVALID_USAGE, "collx_norm_sq_local: the layout is not finalized");
  if (owner >= l->config.dp_size)
    return layout_fail(l, COLLX_ERR_INVALID_ARG,
                       "collx_norm_sq_local: owner_rank " + std::to_string(owner) + " >= dp_size " +
                           std::to_string(l->config.dp_size));
  double s = 0;
  for (const auto& t : l->tensors) {
    if (!counts_in_norm(t.flags, tp_rank, shared)) continue;
    if (owner < 0) {
      s += sum_sq(buffer + t.offset, t.numel);
      continue;
    }
    size_t toff = 0, boff = 0, n = 0;
    collx_status_t st = collx_layout_tensor_shard(l, t.id, owner, &toff, &boff, &n);
    if (st != COLLX_OK) return st;
    s += sum_sq(buffer + boff, n);
  }
  *out = s;
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

extern "C" {

COLLX_API collx_status_t collx_found_nonfinite(float* values, size_t n, float inv_scale, int32_t* found) {
  if (!found || (!values && n)) return COLLX_ERR_INVALID_ARG;
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
  int32_t v = *flag ? 1 : 0;
  collx_status_t st = collx_allreduce(&v, &v, 1, COLLX_INT32, COLLX_MAX, comm, nullptr);
  if (st != COLLX_OK) return collx::parallel::comm_fail(comm, st, "collx_flag_any");
  *flag = v;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_norm_sq_local(collx_layout_t layout, const float* buffer, int32_t owner_rank,
                                             int32_t tp_rank, int32_t count_shared, double* sumsq) {
  if (!layout) return COLLX_ERR_INVALID_ARG;
  if (!buffer || !sumsq)
    return collx::parallel::layout_fail(layout, COLLX_ERR_INVALID_ARG, "collx_norm_sq_local: buffer or sumsq is NULL");
  return collx::parallel::guarded(
      [&] { return collx::parallel::norm_sq(layout, buffer, owner_rank, tp_rank, count_shared, sumsq); },
      [&](const std::string& m) { collx::parallel::layout_fail(layout, COLLX_OK, "collx_norm_sq_local: " + m); });
}

COLLX_API collx_status_t collx_global_norm(double local_sumsq, collx_comm_t comm, double* norm) {
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
  if (!coef) return COLLX_ERR_INVALID_ARG;
  double c = 1.0;
  if (max_norm > 0) c = std::min(1.0, max_norm / (norm + 1e-6));
  *coef = c;
  return COLLX_OK;
}

}  // extern "C"
