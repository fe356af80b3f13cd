// ZeRO gradients: stages 0 and 1 reduce the full bucketed buffer through a reducer and add
// the owned ranges into the float32 shard; stage 2 is zero2_grads.cc; stage 3
// reduce-scatters each full gradient.
#include <algorithm>

#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {
namespace {

collx_status_t need_stage(collx_zero_t z, bool stage3, const char* fn) {
  if ((z->config.stage == 3) == stage3) return COLLX_OK;
  return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                   std::string(fn) + (stage3 ? " is for stage 3 only" : " is for stages 0, 1 and 2 only") +
                       " (this handle is stage " + std::to_string(z->config.stage) + ")");
}

collx_status_t from_dp(collx_zero_t z, collx_status_t st) {
  if (st == COLLX_OK) return st;
  return zero_fail(z, st, collx_dp_last_error(z->dp));
}

collx_status_t finish_grads(collx_zero_t z, int64_t timeout_ms) {
  if (z->config.stage == 3) return COLLX_OK;
  if (z->config.stage == 2) return zero2_finish(z, timeout_ms);
  const bool reduce = z->boundary;
  collx_status_t st = collx_dp_finish(z->dp, timeout_ms);
  if (st != COLLX_OK) return from_dp(z, st);
  if (!reduce) return COLLX_OK;
  float* buf = nullptr;
  collx_dp_buffer(z->dp, &buf, nullptr);
  if (z->device) {
    st = z->device_state ? zero_device_add_grads(z, buf) : zero_offload_grads(z, buf);
    return st != COLLX_OK ? st : from_dp(z, collx_dp_zero(z->dp));
  }
  for (const auto& seg : z->segments)
    for (size_t i = 0; i < seg.count; ++i) z->grad[seg.shard_offset + i] += buf[seg.buffer_offset + i];
  return from_dp(z, collx_dp_zero(z->dp));
}

// Pre-divided by W (DeepSpeed's __avg_scatter_grads), padded per tensor, one reduce-scatter.
collx_status_t reduce_grad(collx_zero_t z, uint64_t id, const void* full_grad) {
  const float* full = static_cast<const float*>(full_grad);  // host buffers: float32
  size_t pos = 0;
  collx_status_t st = zero_find(z, id, "collx_zero3_reduce_grad", &pos);
  if (st != COLLX_OK) return st;
  const auto& t = z->layout->tensors[pos];
  if (!full && t.numel) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero3_reduce_grad: full_grad is NULL");
  const size_t chunk = zero_chunk(z, pos);
  if (!chunk) return COLLX_OK;
  if (z->device) return zero3_device_reduce_grad(z, pos, full);
  collx_zero_s::Floats tmp = z->counted(ZeroMem::kGrads);
  tmp.assign(t.padded, 0.0f);
  const float inv_w = 1.0f / static_cast<float>(z->size);
  for (size_t i = 0; i < t.numel; ++i) tmp[i] = z->size == 1 ? full[i] : full[i] * inv_w;
  float* mine = tmp.data() + static_cast<size_t>(z->rank) * chunk;
  st = collx_reduce_scatter(tmp.data(), mine, chunk, COLLX_FLOAT32, COLLX_SUM, z->comm, nullptr);
  if (st != COLLX_OK)
    return zero_fail(z, st, "collx_zero3_reduce_grad: tensor " + std::to_string(id) + ": " + comm_error(z->comm, st));
  float* g = z->grad.data() + z->segments[z->tensor_segment[pos]].shard_offset;
  for (size_t i = 0; i < chunk; ++i) g[i] += mine[i];
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_zero_grad_ptr(collx_zero_t z, uint64_t tensor_id, float** grad) {
  if (!z || !grad) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_grad_ptr: z or grad is NULL");
  const std::string refusal =
      collx::parallel::float32_only_refusal("collx_zero_grad_ptr", "gradient views", "grad_dtype", z->config.grad_dtype, "collx_zero_grad_view");
  if (!refusal.empty()) return zero_fail(z, COLLX_ERR_INVALID_USAGE, refusal);
  void* view = nullptr;
  const collx_status_t st = collx_zero_grad_view(z, tensor_id, &view, nullptr);
  if (st == COLLX_OK) *grad = static_cast<float*>(view);
  return st;
}

COLLX_API collx_status_t collx_zero_grad_view(collx_zero_t z, uint64_t tensor_id, void** grad, int32_t* dtype) {
  return zero_call(z, "collx_zero_grad_view", [&] {
    collx_status_t st = need_stage(z, false, "collx_zero_grad_view");
    if (st != COLLX_OK) return st;
    if (!grad) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_grad_view: grad is NULL");
    if (dtype) *dtype = z->config.grad_dtype;
    return z->config.stage == 2 ? zero2_grad_ptr(z, tensor_id, grad)
                                : from_dp(z, collx_dp_grad_view(z->dp, tensor_id, grad, nullptr));
  });
}

COLLX_API collx_status_t collx_zero_mark_ready(collx_zero_t z, uint64_t tensor_id) {
  return zero_call(z, "collx_zero_mark_ready", [&] {
    collx_status_t st = need_stage(z, false, "collx_zero_mark_ready");
    if (st != COLLX_OK) return st;
    return z->config.stage == 2 ? zero2_mark(z, tensor_id) : from_dp(z, collx_dp_mark_ready(z->dp, tensor_id));
  });
}

COLLX_API collx_status_t collx_zero_set_boundary(collx_zero_t z, int32_t is_last_microbatch) {
  if (!z) return collx::parallel::refuse_arg(z, "collx_zero_set_boundary", "z is NULL");
  if (is_last_microbatch != 0 && is_last_microbatch != 1)
    return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_set_boundary: is_last_microbatch must be 0 or 1");
  if (z->dp) {  // stages 0, 1 communicate at the boundary only; stage 2 every micro-step
    collx_status_t st = collx_dp_set_sync(z->dp, is_last_microbatch);
    if (st != COLLX_OK) return from_dp(z, st);
  }
  z->boundary = is_last_microbatch == 1;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_finish_grads(collx_zero_t z, int64_t timeout_ms) {
  return zero_call(z, "collx_zero_finish_grads", [&] { return finish_grads(z, timeout_ms); });
}

COLLX_API collx_status_t collx_zero3_reduce_grad(collx_zero_t z, uint64_t tensor_id, const float* full_grad) {
  if (z && z->config.grad_dtype != COLLX_FLOAT32)
    return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                     std::string("collx_zero3_reduce_grad: the gradients are ") +
                         collx_datatype_name(static_cast<collx_datatype_t>(z->config.grad_dtype)) +
                         " (config.grad_dtype), not float32; use collx_zero3_reduce_grad_view");
  return collx_zero3_reduce_grad_view(z, tensor_id, full_grad);
}

COLLX_API collx_status_t collx_zero3_reduce_grad_view(collx_zero_t z, uint64_t tensor_id, const void* full_grad) {
  return zero_call(z, "collx_zero3_reduce_grad", [&] {
    collx_status_t st = need_stage(z, true, "collx_zero3_reduce_grad");
    return st != COLLX_OK ? st : reduce_grad(z, tensor_id, full_grad);
  });
}

}  // extern "C"
