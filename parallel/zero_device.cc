// ZeRO on device buffers (issue 14): the full parameter view and the gradient buffer (stages
// 0, 1) or bucket slots (stage 2) in device memory, ordered on the caller's stream. Supported
// now: stages 0, 1 and 2 with ZeRO-Offload (float32 master shard, gradient shard and optimizer
// state in host memory, the host optimizer of zero_step.cc). The reduced owned ranges come
// down at finish_grads (once per accumulation window for stages 0 and 1, every micro-step for
// stage 2; the only place the host waits for the stream in a step); the updated shard goes up
// before the device all-gather, queued without a wait.
#include <algorithm>
#include <cstring>

#include "lib/common/deadline.h"
#include "lib/cuda/device.h"
#include "parallel/low_precision.h"
#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {

std::string zero_device_unsupported(const collx_zero_config_t& c) {
  if (c.grad_dtype != COLLX_FLOAT32 && c.mem_kind != COLLX_MEM_CUDA)
    return "config->grad_dtype: 16-bit gradient views are supported on device buffers only";
  if (c.param_dtype != COLLX_FLOAT32 && c.mem_kind != COLLX_MEM_CUDA)
    return "config->param_dtype: 16-bit parameters are supported on device buffers only";
  if (c.mem_kind != COLLX_MEM_CUDA) return "";
  std::string why = device_unavailable();
  if (!why.empty()) return "config->mem_kind is COLLX_MEM_CUDA but " + why;
  return "";
}

collx_status_t zero_device_init(collx_zero_t z) {
  z->device = true;
  z->stream = z->config.stream;
  // Stage 3 keeps no full view: its gathered tensors are allocated per fetch.
  const size_t bytes = z->config.stage < 3 ? z->layout->total * zero_param_size(z) : 0;
  // Gradients stay float32 (accumulation); stage 2 has bucket slots instead of a buffer.
  const size_t grad_bytes = z->config.stage < 2 ? z->layout->total * sizeof(float) : 0;
  Status st = z->params_dev.allocate_zeroed(bytes, z->stream);
  if (st.ok()) st = z->grad_buffer_dev.allocate_zeroed(grad_bytes, z->stream);
  if (st.ok()) st = z->staging.allocate(z->shard_count * sizeof(float), z->stream);
  const size_t shard_bytes = z->shard_count * sizeof(float);
  if (!z->config.offload) {
    z->device_state = true;
    const bool m = z->config.optimizer != COLLX_OPT_NONE, v = z->config.optimizer == COLLX_OPT_ADAMW;
    if (st.ok()) st = z->master_dev.allocate_zeroed(shard_bytes, z->stream);
    if (st.ok()) st = z->grad_dev.allocate_zeroed(shard_bytes, z->stream);
    if (st.ok() && m) st = z->exp_avg_dev.allocate_zeroed(shard_bytes, z->stream);
    if (st.ok() && v) st = z->exp_avg_sq_dev.allocate_zeroed(shard_bytes, z->stream);
    z->mem.add(ZeroMem::kGrads, shard_bytes);
    z->mem.add(ZeroMem::kOptim, shard_bytes * (1 + (m ? 1 : 0) + (v ? 1 : 0)));
  }
  if (!st.ok()) return zero_fail(z, st.code(), "allocating device buffers: " + st.message());
  // Booked as the host buffers are, so collx_zero_memory shows where the bytes went.
  z->mem.add(ZeroMem::kParams, bytes);
  z->mem.add(ZeroMem::kGrads, grad_bytes);
  z->mem.add(ZeroMem::kComm, z->shard_count * sizeof(float));
  return COLLX_OK;
}

char* zero_params(collx_zero_t z) {
  return z->device ? static_cast<char*>(z->params_dev.get()) : reinterpret_cast<char*>(z->params.data());
}

size_t zero_param_size(collx_zero_t z) { return z->config.param_dtype == COLLX_FLOAT32 ? sizeof(float) : 2; }

collx_status_t zero_offload_grads(collx_zero_t z, const float* buffer) {
  for (const auto& seg : z->segments) {
    if (!seg.count) continue;
    const Status st = cuda::copy_async(z->staging.floats() + seg.shard_offset, buffer + seg.buffer_offset,
                                       seg.count * sizeof(float), cuda::CopyKind::kDeviceToHost, z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_finish_grads: copying the gradient shard: " + st.message());
  }
  return zero_offload_add(z, "collx_zero_finish_grads");
}

collx_status_t zero2_offload_copy(collx_zero_t z, float* owned, const uint16_t* wire, size_t shard_offset,
                                  size_t count) {
  if (!count) return COLLX_OK;
  if (wire) {  // 16-bit wire: widened into the slot on the stream first
    const Status ws = cuda::cast_scale(owned, COLLX_FLOAT32, wire, static_cast<collx_datatype_t>(z->config.comm_dtype),
                                       count, 1.0f, z->stream);
    if (!ws.ok()) return zero_fail(z, ws.code(), "widening a 16-bit gradient range: " + ws.message());
  }
  if (z->device_state) {  // added into the device shard, on the stream
    const Status as = device_add(zero_grad_shard(z) + shard_offset, owned, count, z->stream);
    if (!as.ok()) return zero_fail(z, as.code(), "adding a gradient range into the shard: " + as.message());
    return COLLX_OK;
  }
  const Status st = cuda::copy_async(z->staging.floats() + shard_offset, owned, count * sizeof(float),
                                     cuda::CopyKind::kDeviceToHost, z->stream);
  if (!st.ok()) return zero_fail(z, st.code(), "copying a gradient shard range to the host: " + st.message());
  return COLLX_OK;
}

collx_status_t zero_offload_add(collx_zero_t z, const char* fn) {
  const Status st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr,
                                      "the gradient shard's copy to the host");
  if (!st.ok()) return zero_fail(z, st.code(), std::string(fn) + ": " + st.message());
  for (size_t i = 0; i < z->shard_count; ++i) z->grad[i] += z->staging.floats()[i];
  return COLLX_OK;
}

float* zero_master(collx_zero_t z) {
  return z->device_state ? static_cast<float*>(z->master_dev.get()) : z->master.data();
}

float* zero_grad_shard(collx_zero_t z) {
  return z->device_state ? static_cast<float*>(z->grad_dev.get()) : z->grad.data();
}

float* zero_device_state(collx_zero_t z, int32_t kind) {
  if (kind == COLLX_ZERO_MASTER) return static_cast<float*>(z->master_dev.get());
  if (kind == COLLX_ZERO_EXP_AVG) return static_cast<float*>(z->exp_avg_dev.get());
  if (kind == COLLX_ZERO_EXP_AVG_SQ) return static_cast<float*>(z->exp_avg_sq_dev.get());
  return nullptr;
}

collx_status_t zero_device_download(collx_zero_t z, int32_t kind, const char* fn, collx_zero_s::Floats** out) {
  const float* dev = zero_device_state(z, kind);
  if (!dev)
    return zero_fail(z, COLLX_ERR_INVALID_ARG,
                     std::string(fn) + ": kind " + std::to_string(kind) + " is not kept by this handle's optimizer (" +
                         std::to_string(z->config.optimizer) + ") or is not a collx_zero_state_kind_t");
  z->mirror.resize(z->shard_count);
  Status st = cuda::copy_async(z->mirror.data(), dev, z->shard_count * sizeof(float), cuda::CopyKind::kDeviceToHost,
                               z->stream);
  if (st.ok()) st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr, fn);
  if (!st.ok()) return zero_fail(z, st.code(), std::string(fn) + ": reading the device state: " + st.message());
  *out = &z->mirror;
  return COLLX_OK;
}

collx_status_t zero_device_upload(collx_zero_t z, int32_t kind, size_t shard_offset, size_t count, const char* fn) {
  Status st = cuda::copy_async(zero_device_state(z, kind) + shard_offset, z->mirror.data() + shard_offset,
                               count * sizeof(float), cuda::CopyKind::kHostToDevice, z->stream);
  if (st.ok()) st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr, fn);
  if (!st.ok()) return zero_fail(z, st.code(), std::string(fn) + ": writing the device state: " + st.message());
  return COLLX_OK;
}

collx_status_t zero_device_add_grads(collx_zero_t z, const float* buffer) {
  for (const auto& seg : z->segments) {
    const Status st = device_add(zero_grad_shard(z) + seg.shard_offset, buffer + seg.buffer_offset, seg.count, z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_finish_grads: adding the gradient shard: " + st.message());
  }
  return COLLX_OK;
}

collx_status_t zero_device_step(collx_zero_t z, float grad_scale) {
  const collx_zero_config_t& c = z->config;
  cuda::OptimizerStep s;
  s.lr = c.lr;
  s.weight_decay = c.weight_decay;
  s.momentum = c.momentum;
  s.beta1 = c.beta1;
  s.beta2 = c.beta2;
  s.eps = c.eps;
  s.step = z->steps;
  s.grad_scale = grad_scale;
  s.zero_grad = true;  // as the host step zeroes the gradient shard
  float* m = static_cast<float*>(z->exp_avg_dev.get());
  const Status st =
      c.optimizer == COLLX_OPT_SGD
          ? cuda::sgd_step(zero_master(z), zero_grad_shard(z), c.momentum != 0 ? m : nullptr, z->shard_count, s,
                           nullptr, COLLX_FLOAT32, z->stream)
          : cuda::adamw_step(zero_master(z), zero_grad_shard(z), m, static_cast<float*>(z->exp_avg_sq_dev.get()),
                             z->shard_count, s, nullptr, COLLX_FLOAT32, z->stream);
  if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_step: " + st.message());
  return COLLX_OK;
}

collx_status_t zero_device_norm(collx_zero_t z, const std::vector<std::pair<size_t, size_t>>& ranges, double* out) {
  DeviceMem acc;
  Status st = acc.allocate_zeroed(sizeof(double), z->stream);
  for (size_t i = 0; st.ok() && i < ranges.size(); ++i)
    st = cuda::sum_squares(zero_grad_shard(z) + ranges[i].first, COLLX_FLOAT32, ranges[i].second,
                           static_cast<double*>(acc.get()), z->stream);
  if (st.ok()) st = cuda::copy_async(out, acc.get(), sizeof(double), cuda::CopyKind::kDeviceToHost, z->stream);
  if (st.ok())
    st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr, "collx_zero_grad_norm_sq");
  if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_grad_norm_sq: " + st.message());
  return COLLX_OK;
}

collx_status_t zero_device_publish_copy(collx_zero_t z) {
  if (z->device_state) {  // shard -> its owned ranges of the view, rounded to param_dtype on the device
    const auto dt = static_cast<collx_datatype_t>(z->config.param_dtype);
    for (const auto& seg : z->segments) {
      const Status st = cuda::cast_scale(zero_params(z) + seg.buffer_offset * zero_param_size(z), dt,
                                         zero_master(z) + seg.shard_offset, COLLX_FLOAT32, seg.count, 1.0f, z->stream);
      if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_publish: " + st.message());
    }
    return COLLX_OK;
  }
  // The copies read `staging`, not the master: the host may step or load the master before
  // they run. The next write into staging is finish_grads' copy, queued after these.
  // 16-bit parameters: rounded here, on the host (offload), into the front of the staging.
  const size_t es = zero_param_size(z);
  if (es == sizeof(float))
    std::copy(z->master.begin(), z->master.end(), z->staging.floats());
  else
    pack_half(z->master.data(), reinterpret_cast<uint16_t*>(z->staging.floats()), z->shard_count, 1.0f,
              z->config.param_dtype);
  char* params = zero_params(z);
  const char* up = reinterpret_cast<const char*>(z->staging.floats());
  for (const auto& seg : z->segments) {
    if (!seg.count) continue;
    const Status st = cuda::copy_async(params + seg.buffer_offset * es, up + seg.shard_offset * es, seg.count * es,
                                       cuda::CopyKind::kHostToDevice, z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_publish: copying the master shard: " + st.message());
  }
  return COLLX_OK;
}

collx_status_t zero_device_load_master(collx_zero_t z, uint64_t id, size_t toff, size_t count, const float* values,
                                       const char* fn) {
  size_t pos = 0;
  collx_status_t zs = zero_find(z, id, fn, &pos);
  if (zs != COLLX_OK) return zs;
  const auto& t = z->layout->tensors[pos];
  if (toff > t.numel || count > t.numel - toff)
    return zero_fail(z, COLLX_ERR_INVALID_ARG, std::string(fn) + ": elements outside tensor " + std::to_string(id));
  if (!values && count) return zero_fail(z, COLLX_ERR_INVALID_ARG, std::string(fn) + ": values is NULL");
  size_t own_off = 0, boff = 0, n = 0;
  zero_owned(z, pos, &own_off, &boff, &n);
  const size_t lo = std::max(own_off, toff), hi = std::min(own_off + n, toff + count);
  if (lo < hi) {  // the owned part is contiguous in the shard
    const Status st = cuda::copy_async(zero_master(z) + zero_shard_offset(z, pos, boff + (lo - own_off)),
                                       values + (lo - toff), (hi - lo) * sizeof(float), cuda::CopyKind::kHostToDevice,
                                       z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), std::string(fn) + ": " + st.message());
  }
  return zero_device_load_params(z, t.offset + toff, values, count);  // waits for both copies
}

collx_status_t zero3_device_reduce_grad(collx_zero_t z, size_t pos, const void* full) {
  const auto& t = z->layout->tensors[pos];
  const size_t chunk = zero_chunk(z, pos);
  DeviceMem tmp;  // padded, zeroed; freed after the stream drained
  Status st = tmp.allocate_zeroed(t.padded * sizeof(float), z->stream);
  float* buf = static_cast<float*>(tmp.get());
  // Pre-divided by W as the host path (W = 1: an exact copy); 16-bit gradients widened.
  if (st.ok() && t.numel)
    st = cuda::cast_scale(buf, COLLX_FLOAT32, full, static_cast<collx_datatype_t>(z->config.grad_dtype), t.numel,
                          z->size == 1 ? 1.0f : 1.0f / static_cast<float>(z->size), z->stream);
  if (!st.ok()) return zero_fail(z, st.code(), "collx_zero3_reduce_grad: " + st.message());
  float* mine = buf + static_cast<size_t>(z->rank) * chunk;
  const collx_opts_t opts = device_opts(z->stream);
  const collx_status_t cs = collx_reduce_scatter(buf, mine, chunk, COLLX_FLOAT32, COLLX_SUM, z->comm, &opts);
  if (cs != COLLX_OK)
    return zero_fail(z, cs, "collx_zero3_reduce_grad: tensor " + std::to_string(t.id) + ": " + comm_error(z->comm, cs));
  const size_t shard_offset = z->segments[z->tensor_segment[pos]].shard_offset;
  if (z->device_state) {
    st = device_add(zero_grad_shard(z) + shard_offset, mine, chunk, z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), "collx_zero3_reduce_grad: " + st.message());
    return COLLX_OK;
  }
  // Offload: through the staging (its range for this tensor), then added on the host.
  st = cuda::copy_async(z->staging.floats() + shard_offset, mine, chunk * sizeof(float), cuda::CopyKind::kDeviceToHost,
                        z->stream);
  if (st.ok())
    st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr, "collx_zero3_reduce_grad");
  if (!st.ok()) return zero_fail(z, st.code(), "collx_zero3_reduce_grad: " + st.message());
  for (size_t i = 0; i < chunk; ++i) z->grad[shard_offset + i] += z->staging.floats()[shard_offset + i];
  return COLLX_OK;
}

collx_status_t zero_device_load_params(collx_zero_t z, size_t offset, const float* values, size_t count) {
  if (!count) return COLLX_OK;
  const size_t es = zero_param_size(z);
  std::vector<uint16_t> rounded;
  const void* src = values;
  if (es != sizeof(float)) {
    rounded.resize(count);
    pack_half(values, rounded.data(), count, 1.0f, z->config.param_dtype);
    src = rounded.data();
  }
  Status st;
  if (z->config.stage < 3)  // stage 3: only the master shard (already queued) is written
    st = cuda::copy_async(zero_params(z) + offset * es, src, count * es, cuda::CopyKind::kHostToDevice, z->stream);
  if (st.ok())
    st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr,
                           "collx_zero_load: the parameters' copy to the device");
  if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_load: " + st.message());
  return COLLX_OK;
}

}  // namespace parallel
}  // namespace collx
