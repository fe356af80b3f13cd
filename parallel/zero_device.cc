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
#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {

std::string zero_device_unsupported(const collx_zero_config_t& c) {
  if (c.param_dtype != COLLX_FLOAT32 || c.grad_dtype != COLLX_FLOAT32)
    return "config->param_dtype / grad_dtype: 16-bit parameters and gradients are not supported yet (COLLX_FLOAT32)";
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
  if (c.comm_dtype != COLLX_FLOAT32)
    return "config->comm_dtype 16-bit with device buffers is not supported yet; use COLLX_FLOAT32";
  return "";
}

collx_status_t zero_device_init(collx_zero_t z) {
  z->device = true;
  z->stream = z->config.stream;
  const size_t bytes = z->layout->total * sizeof(float);
  const size_t grad_bytes = z->config.stage < 2 ? bytes : 0;  // stage 2: bucket slots instead
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

float* zero_params(collx_zero_t z) {
  return z->device ? static_cast<float*>(z->params_dev.get()) : z->params.data();
}

collx_status_t zero_offload_grads(collx_zero_t z, const float* buffer) {
  for (const auto& seg : z->segments) {
    if (!seg.count) continue;
    const Status st = cuda::copy_async(z->staging.floats() + seg.shard_offset, buffer + seg.buffer_offset,
                                       seg.count * sizeof(float), cuda::CopyKind::kDeviceToHost, z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_finish_grads: copying the gradient shard: " + st.message());
  }
  return zero_offload_add(z, "collx_zero_finish_grads");
}

collx_status_t zero2_offload_copy(collx_zero_t z, const float* owned, size_t shard_offset, size_t count) {
  if (!count) return COLLX_OK;
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
  std::copy(z->master.begin(), z->master.end(), z->staging.floats());
  float* params = zero_params(z);
  for (const auto& seg : z->segments) {
    if (!seg.count) continue;
    const Status st = cuda::copy_async(params + seg.buffer_offset, z->staging.floats() + seg.shard_offset,
                                       seg.count * sizeof(float), cuda::CopyKind::kHostToDevice, z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_publish: copying the master shard: " + st.message());
  }
  return COLLX_OK;
}

collx_status_t zero_device_load_params(collx_zero_t z, size_t offset, const float* values, size_t count) {
  if (!count) return COLLX_OK;
  Status st = cuda::copy_async(zero_params(z) + offset, values, count * sizeof(float), cuda::CopyKind::kHostToDevice,
                               z->stream);
  if (st.ok())
    st = cuda::stream_wait(z->stream, Deadline::after_ms(z->config.timeout_ms), nullptr,
                           "collx_zero_load: the parameters' copy to the device");
  if (!st.ok()) return zero_fail(z, st.code(), "collx_zero_load: " + st.message());
  return COLLX_OK;
}

}  // namespace parallel
}  // namespace collx
