// Data-parallel reducer: configuration, creation from a layout, views and queries.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include "lib/cuda/device.h"
#include "parallel/device_mem.h"
#include "parallel/dp_internal.h"
#include "parallel/free_calls.h"
#include "parallel/low_precision.h"

namespace collx {
namespace parallel {

namespace {

// Size of the config before the device fields: callers compiled then get the defaults.
constexpr size_t kConfigSizeV1 = offsetof(collx_dp_config_t, mem_kind);

void set_defaults(collx_dp_config_t* config) {
  std::memset(config, 0, sizeof(collx_dp_config_t));
  config->size = sizeof(collx_dp_config_t);
  config->mode = COLLX_DP_ALLREDUCE;
  config->average = 1;
  config->predivide = 0.0;
  config->comm_dtype = COLLX_FLOAT32;
  config->allow_unused = 0;
  config->check_marks = 1;
  config->timeout_ms = 60000;
  config->mem_kind = COLLX_MEM_HOST;
  config->grad_dtype = COLLX_FLOAT32;
  config->stream = nullptr;
}

collx_status_t dp_create_fail(collx_status_t st, const std::string& msg) {
  return collx::parallel::create_fail("collx_dp_create", st, msg);
}

std::string check_config(const collx_dp_config_t& c) {
  if (c.mode != COLLX_DP_ALLREDUCE && c.mode != COLLX_DP_REDUCE_SCATTER)
    return "config->mode is " + std::to_string(c.mode) +
           " (COLLX_DP_ALLREDUCE or COLLX_DP_REDUCE_SCATTER)";
  if (c.average != 0 && c.average != 1) return "config->average must be 0 or 1";
  if (!(c.predivide >= 0.0) || std::isinf(c.predivide))
    return "config->predivide must be finite and >= 0 (0 = the dp size)";
  if (c.comm_dtype != COLLX_FLOAT32 && !is_half_type(c.comm_dtype))
    return std::string("config->comm_dtype is ") +
           collx_datatype_name(static_cast<collx_datatype_t>(c.comm_dtype)) +
           "; the reducer communicates float32, bfloat16 or float16";
  if (c.allow_unused != 0 && c.allow_unused != 1) return "config->allow_unused must be 0 or 1";
  if (c.check_marks != 0 && c.check_marks != 1) return "config->check_marks must be 0 or 1";
  if (c.mem_kind != COLLX_MEM_AUTO && c.mem_kind != COLLX_MEM_HOST && c.mem_kind != COLLX_MEM_CUDA)
    return "config->mem_kind is " + std::to_string(c.mem_kind) +
           " (COLLX_MEM_HOST, COLLX_MEM_CUDA or COLLX_MEM_AUTO)";
  if (c.grad_dtype != COLLX_FLOAT32 && !is_half_type(c.grad_dtype))
    return std::string("config->grad_dtype is ") +
           collx_datatype_name(static_cast<collx_datatype_t>(c.grad_dtype)) +
           "; gradient views are float32, bfloat16 or float16";
  return "";
}

// What the reducer cannot do yet on a valid config (COLLX_ERR_UNSUPPORTED), or "".
std::string unsupported(const collx_dp_config_t& c, int32_t kind) {
  if (c.grad_dtype != COLLX_FLOAT32 && kind != COLLX_MEM_CUDA)
    return std::string("config->grad_dtype ") + collx_datatype_name(static_cast<collx_datatype_t>(c.grad_dtype)) +
           ": 16-bit gradient views are supported on device buffers only (config->mem_kind COLLX_MEM_CUDA)";
  if (kind != COLLX_MEM_CUDA) return "";
  const std::string why = collx::parallel::device_unavailable();
  return why.empty() ? "" : "config->mem_kind is COLLX_MEM_CUDA but " + why;
}

// A borrowed buffer must be of the configured kind: host code touching a device buffer
// crashes, and the device path handed a host buffer would be wrong too.
std::string check_buffer_kind(const void* buffer, int32_t kind) {
  if (!buffer) return "";
  const bool on_device = collx::cuda::pointer_kind(buffer) == COLLX_MEM_CUDA;
  if (on_device && kind == COLLX_MEM_HOST)
    return "grad_buffer is device memory but config->mem_kind is COLLX_MEM_HOST (set COLLX_MEM_CUDA and "
           "config->stream)";
  if (!on_device && kind == COLLX_MEM_CUDA)
    return "grad_buffer is host memory but config->mem_kind is COLLX_MEM_CUDA";
  return "";
}

// Checks the layout against the communicator and the reducer's float32 buffer.
std::string check_layout(collx_layout_t l, int32_t comm_size, int32_t mode) {
  std::string why = float_layout_problem(l, comm_size);
  if (why.empty() && mode == COLLX_DP_REDUCE_SCATTER && l->config.partition != COLLX_PART_FLAT)
    why = "COLLX_DP_REDUCE_SCATTER needs a COLLX_PART_FLAT layout (contiguous owner ranges)";
  return why;
}

collx_status_t create(collx_comm_t comm, collx_layout_t layout, const collx_dp_config_t* config,
                      void* grad_buffer, collx_dp_t* out) {
  if (!out) return dp_create_fail(COLLX_ERR_INVALID_ARG, "dp (output) is NULL");
  *out = nullptr;
  if (!comm) return dp_create_fail(COLLX_ERR_INVALID_ARG, "dp_comm is NULL");
  if (!layout) return dp_create_fail(COLLX_ERR_INVALID_ARG, "layout is NULL");
  if (!config) return dp_create_fail(COLLX_ERR_INVALID_ARG, "config is NULL");
  if (config->size < kConfigSizeV1)
    return dp_create_fail(COLLX_ERR_INVALID_ARG, "config->size is " + std::to_string(config->size) +
                                                  ", expected " + std::to_string(sizeof(collx_dp_config_t)) +
                                                  " (call collx_dp_config_init)");
  collx_dp_config_t cfg;
  set_defaults(&cfg);
  std::memcpy(&cfg, config, std::min(config->size, sizeof cfg));  // older callers: defaults
  cfg.size = sizeof cfg;
  config = &cfg;
  std::string why = check_config(*config);
  if (!why.empty()) return dp_create_fail(COLLX_ERR_INVALID_ARG, why);
  const int32_t kind = collx::parallel::resolve_mem_kind(config->mem_kind, grad_buffer);
  why = unsupported(*config, kind);
  if (!why.empty()) return dp_create_fail(COLLX_ERR_UNSUPPORTED, why);
  why = check_buffer_kind(grad_buffer, kind);
  if (!why.empty()) return dp_create_fail(COLLX_ERR_INVALID_ARG, why);
  int32_t rank = 0, size = 0;
  collx_status_t st = collx_comm_rank(comm, &rank);
  if (st == COLLX_OK) st = collx_comm_size(comm, &size);
  if (st != COLLX_OK) return dp_create_fail(st, comm_error(comm, st));
  why = check_layout(layout, size, config->mode);
  if (!why.empty()) return dp_create_fail(COLLX_ERR_INVALID_ARG, why);

  auto dp = new collx_dp_s();
  dp->comm = comm;
  dp->rank = rank;
  dp->size = size;
  dp->layout = layout;
  dp->config = *config;
  dp->config.size = sizeof(collx_dp_config_t);
  dp->total = layout->total;
  dp->device = kind == COLLX_MEM_CUDA;
  dp->stream = dp->device ? config->stream : nullptr;
  dp->config.mem_kind = kind;
  if (grad_buffer) {
    dp->buffer = static_cast<float*>(grad_buffer);
  } else if (dp->device) {
    const Status st = dp->owned_device.allocate_zeroed(dp->total * sizeof(float), dp->stream);
    if (!st.ok()) {
      delete dp;
      return dp_create_fail(st.code(), "allocating the device gradient buffer: " + st.message());
    }
    dp->buffer = static_cast<float*>(dp->owned_device.get());
  } else {
    dp->owned_buffer.assign(dp->total, 0.0f);
    dp->buffer = dp->owned_buffer.data();
  }
  const double w = static_cast<double>(size);
  const double p = config->predivide > 0 ? config->predivide : (config->average ? w : 1.0);
  dp->pre = static_cast<float>(1.0 / p);
  dp->post = static_cast<float>(config->average ? p / w : p);
  dp->marked.assign(layout->tensors.size(), 0);
  dp->buckets.resize(layout->buckets.size());
  const bool host_half = is_half_type(config->comm_dtype) && !dp->device;
  for (size_t b = 0; b < layout->buckets.size(); ++b) {
    dp->buckets[b].start = layout->buckets[b].start;
    dp->buckets[b].padded = layout->buckets[b].padded;
    if (host_half) dp->buckets[b].staging.assign(layout->buckets[b].padded, 0);
  }
  if (dp->device && is_half_type(config->grad_dtype)) {
    const Status st = dp->device_views.allocate_zeroed(dp->total * sizeof(uint16_t), dp->stream);
    if (!st.ok()) {
      delete dp;
      return dp_create_fail(st.code(), "allocating the device 16-bit gradient views: " + st.message());
    }
  }
  if (dp->device && is_half_type(config->comm_dtype)) {
    const Status st = dp->device_wire.allocate_zeroed(dp->total * sizeof(uint16_t), dp->stream);
    if (!st.ok()) {
      delete dp;
      return dp_create_fail(st.code(), "allocating the device 16-bit wire buffer: " + st.message());
    }
  }
  for (const auto& t : layout->tensors) dp->buckets[t.bucket].num_tensors++;
  for (auto& b : dp->buckets) b.pending = b.num_tensors;
  try {
    if (host_half) dp->helper.reset(new DpHelper(dp));  // device: the kernels are queued, not run
  } catch (...) {  // no thread to be had: guarded() reports it
    delete dp;
    throw;
  }
  *out = dp;
  return COLLX_OK;
}

}  // namespace

collx_status_t dp_fail(collx_dp_t dp, collx_status_t st, const std::string& msg) {
  if (dp) dp->error.set(msg);
  return st;
}

std::string comm_error(collx_comm_t comm, collx_status_t st) {
  const char* e = collx_last_error(comm);
  if (e && *e) return e;  // the core's message already starts with the status name
  return std::string(collx_status_name(st)) + ": " + collx_status_string(st);
}

collx_status_t dp_fold_views(collx_dp_t dp, size_t b, std::string* why) {
  const collx_dp_s::Bucket& bk = dp->buckets[b];
  if (!dp->device_views.get() || bk.padded == 0) return COLLX_OK;
  uint16_t* views = static_cast<uint16_t*>(dp->device_views.get()) + bk.start;
  Status st = cuda::accumulate(dp->buffer + bk.start, views, static_cast<collx_datatype_t>(dp->config.grad_dtype),
                               bk.padded, 1.0f, dp->stream);
  if (st.ok()) st = cuda::memset_async(views, 0, bk.padded * sizeof(uint16_t), dp->stream);
  if (!st.ok()) *why = "bucket " + std::to_string(b) + ": folding the 16-bit gradients in failed: " + st.message();
  return st.code();
}

collx_status_t dp_start_bucket(collx_dp_t dp, size_t b, std::string* why) {
  collx_dp_s::Bucket& bk = dp->buckets[b];
  if (bk.padded == 0) return COLLX_OK;
  const collx_status_t folded = dp_fold_views(dp, b, why);
  if (folded != COLLX_OK) return folded;
  float* data = dp->buffer + bk.start;
  const bool half = is_half_type(dp->config.comm_dtype);
  void* wire = data;
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  if (dp->device) {
    // Queued on the stream after the gradients; the collective below is ordered after it.
    Status scaled;
    if (half) {
      wire = static_cast<uint16_t*>(dp->device_wire.get()) + bk.start;
      scaled = cuda::cast_scale(wire, static_cast<collx_datatype_t>(dp->config.comm_dtype), data, COLLX_FLOAT32,
                                bk.padded, dp->pre, dp->stream);
    } else {
      scaled = device_scale(data, bk.padded, dp->pre, dp->stream);
    }
    if (!scaled.ok()) {
      *why = "bucket " + std::to_string(b) + ": queuing the pre-scale failed: " + scaled.message();
      return scaled.code();
    }
    opts.mem_kind = COLLX_MEM_CUDA;
    opts.stream = dp->stream;
  } else if (half) {
    pack_half(data, bk.staging.data(), bk.padded, dp->pre, dp->config.comm_dtype);
    wire = bk.staging.data();
  } else {
    scale_in_place(data, bk.padded, dp->pre);
  }
  const auto dt = static_cast<collx_datatype_t>(dp->config.comm_dtype);
  collx_status_t st;
  if (dp->config.mode == COLLX_DP_ALLREDUCE) {
    st = collx_iallreduce(wire, wire, bk.padded, dt, COLLX_SUM, dp->comm, &opts, &bk.request);
  } else {
    const size_t share = bk.padded / static_cast<size_t>(dp->size);
    char* recv = static_cast<char*>(wire) + static_cast<size_t>(dp->rank) * share * (half ? 2 : 4);
    st = collx_ireduce_scatter(wire, recv, share, dt, COLLX_SUM, dp->comm, &opts, &bk.request);
  }
  if (st != COLLX_OK) {
    bk.request = nullptr;
    *why = "launching bucket " + std::to_string(b) + " failed: " + comm_error(dp->comm, st);
  }
  return st;
}

// The whole bucket (all-reduce) or this rank's owner range (reduce-scatter).
collx_status_t dp_complete_bucket(collx_dp_t dp, collx_dp_s::Bucket& bk, std::string* why) {
  size_t from = 0, n = bk.padded;
  if (dp->config.mode == COLLX_DP_REDUCE_SCATTER) {
    n = bk.padded / static_cast<size_t>(dp->size);
    from = static_cast<size_t>(dp->rank) * n;
  }
  float* data = dp->buffer + bk.start + from;
  if (dp->device) {
    // The collective's result is ordered on the stream; so is the scale after it.
    const auto dt = static_cast<collx_datatype_t>(dp->config.comm_dtype);
    const Status st =
        is_half_type(dt) ? cuda::cast_scale(data, COLLX_FLOAT32, static_cast<uint16_t*>(dp->device_wire.get()) + bk.start + from,
                                            dt, n, dp->post, dp->stream)
                         : device_scale(data, n, dp->post, dp->stream);
    if (!st.ok()) *why = "queuing the post-scale failed: " + st.message();
    return st.code();
  }
  if (is_half_type(dp->config.comm_dtype))
    unpack_half(bk.staging.data() + from, data, n, dp->post, dp->config.comm_dtype);
  else
    scale_in_place(data, n, dp->post);
  return COLLX_OK;
}

void dp_drain(collx_dp_t dp) {
  dp->helper.reset();  // it launches what it was handed, then waits for it
  for (auto& b : dp->buckets) {
    if (!b.request) continue;
    collx_wait(b.request, -1);
    collx_request_free(b.request);
    b.request = nullptr;
  }
}

}  // namespace parallel
}  // namespace collx

using collx::parallel::dp_fail;
using collx::parallel::guarded;

extern "C" {

COLLX_API collx_status_t collx_dp_config_init(collx_dp_config_t* config, size_t size) {
  if (!config || size < collx::parallel::kConfigSizeV1)
    return collx::parallel::refuse_arg(nullptr, "collx_dp_config_init", "config is NULL or size is too small (pass sizeof the struct)");
  collx_dp_config_t c;
  collx::parallel::set_defaults(&c);
  c.size = size;
  std::memcpy(config, &c, std::min(size, sizeof c));  // a caller's older, shorter struct
  return COLLX_OK;
}

COLLX_API collx_status_t collx_dp_create(collx_comm_t dp_comm, collx_layout_t layout,
                                         const collx_dp_config_t* config, void* grad_buffer,
                                         collx_dp_t* dp) {
  return guarded([&] { return collx::parallel::create(dp_comm, layout, config, grad_buffer, dp); },
                 [&](const std::string& m) { collx::parallel::dp_create_fail(COLLX_OK, m); });
}

COLLX_API collx_status_t collx_dp_destroy(collx_dp_t dp) {
  if (!dp) return COLLX_OK;
  collx::parallel::dp_drain(dp);
  delete dp;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_dp_grad_ptr(collx_dp_t dp, uint64_t tensor_id, float** grad) {
  if (!dp || !grad) return dp_fail(dp, COLLX_ERR_INVALID_ARG, "collx_dp_grad_ptr: dp or grad is NULL");
  const std::string refusal =
      collx::parallel::float32_only_refusal("collx_dp_grad_ptr", "gradient views", "grad_dtype", dp->config.grad_dtype, "collx_dp_grad_view");
  if (!refusal.empty()) return dp_fail(dp, COLLX_ERR_INVALID_USAGE, refusal);
  void* view = nullptr;
  const collx_status_t st = collx_dp_grad_view(dp, tensor_id, &view, nullptr);
  if (st == COLLX_OK) *grad = static_cast<float*>(view);
  return st;
}

COLLX_API collx_status_t collx_dp_grad_view(collx_dp_t dp, uint64_t tensor_id, void** grad, int32_t* dtype) {
  if (!dp || !grad) return dp_fail(dp, COLLX_ERR_INVALID_ARG, "collx_dp_grad_ptr: dp or grad is NULL");
  auto it = dp->layout->index.find(tensor_id);
  if (it == dp->layout->index.end())
    return dp_fail(dp, COLLX_ERR_INVALID_ARG,
                   "collx_dp_grad_ptr: tensor " + std::to_string(tensor_id) + " is not in the layout");
  const size_t offset = dp->layout->tensors[it->second].offset;
  if (dtype) *dtype = dp->config.grad_dtype;
  if (dp->device_views.get())
    *grad = static_cast<uint16_t*>(dp->device_views.get()) + offset;
  else
    *grad = dp->buffer + offset;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_dp_buffer(collx_dp_t dp, float** buffer, size_t* count) {
  if (!dp) return collx::parallel::refuse_arg(dp, "collx_dp_buffer", "dp is NULL");
  if (buffer) *buffer = dp->buffer;
  if (count) *count = dp->total;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_dp_bucket_state(collx_dp_t dp, size_t bucket, size_t* pending,
                                               int32_t* launched) {
  if (!dp) return collx::parallel::refuse_arg(dp, "collx_dp_bucket_state", "dp is NULL");
  if (bucket >= dp->buckets.size())
    return dp_fail(dp, COLLX_ERR_INVALID_ARG,
                   "collx_dp_bucket_state: bucket " + std::to_string(bucket) + " of " +
                       std::to_string(dp->buckets.size()));
  if (pending) *pending = dp->buckets[bucket].pending;
  if (launched) *launched = dp->buckets[bucket].launched ? 1 : 0;
  return COLLX_OK;
}

COLLX_API const char* collx_dp_last_error(collx_dp_t dp) {
  if (!dp) return collx::parallel::thread_error().c_str();
  return dp->error.get();
}

}  // extern "C"
