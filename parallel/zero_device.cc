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
  if (c.grad_dtype != COLLX_FLOAT32)
    return "config->grad_dtype: 16-bit gradient views are not supported yet (COLLX_FLOAT32 gradients, float32 "
           "accumulation)";
  if (c.param_dtype != COLLX_FLOAT32 && (c.mem_kind != COLLX_MEM_CUDA || c.stage > 2))
    return "config->param_dtype: 16-bit parameters are supported on device buffers, stages 0-2, only";
  if (c.mem_kind != COLLX_MEM_CUDA) return "";
  std::string why = device_unavailable();
  if (!why.empty()) return "config->mem_kind is COLLX_MEM_CUDA but " + why;
  if (c.stage > 2)
    return "config->mem_kind COLLX_MEM_CUDA: stage " + std::to_string(c.stage) +
           " on device buffers is not supported yet (stages 0, 1 and 2 with offload = 1)";
  if (c.deterministic)
    return "config->deterministic with device buffers is not supported yet (stage 2 on host buffers)";
  if (!c.offload)
    return "config->mem_kind COLLX_MEM_CUDA with offload = 0 (master shard and optimizer on the device) is not "
           "supported yet; set config->offload = 1 (ZeRO-Offload)";
  return "";
}

collx_status_t zero_device_init(collx_zero_t z) {
  z->device = true;
  z->stream = z->config.stream;
  const size_t bytes = z->layout->total * zero_param_size(z);
  // Gradients stay float32 (accumulation); stage 2 has bucket slots instead of a buffer.
  const size_t grad_bytes = z->config.stage < 2 ? z->layout->total * sizeof(float) : 0;
  Status st = z->params_dev.allocate_zeroed(bytes, z->stream);
  if (st.ok()) st = z->grad_buffer_dev.allocate_zeroed(grad_bytes, z->stream);
  if (st.ok()) st = z->staging.allocate(z->shard_count * sizeof(float), z->stream);
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

collx_status_t zero_device_publish_copy(collx_zero_t z) {
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
  Status st = cuda::copy_async(zero_params(z) + offset * es, src, count * es, cuda::CopyKind::kHostToDevice, z->stream);
  if (st.ok())
    st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr,
                           "collx_zero_load: the parameters' copy to the device");
  if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_load: " + st.message());
  return COLLX_OK;
}

}  // namespace parallel
}  // namespace collx
