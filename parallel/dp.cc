// Data-parallel reducer: configuration, creation from a layout, views and queries.
#include <cmath>

#include "parallel/dp_internal.h"
#include "parallel/free_calls.h"
#include "parallel/low_precision.h"

namespace collx {
namespace parallel {

namespace {

collx_status_t dp_create_fail(collx_status_t st, const std::string& msg) {
  return collx::parallel::create_fail(Handle::kDp, "collx_dp_create", st, msg);
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
  if (config->size < sizeof(collx_dp_config_t))
    return dp_create_fail(COLLX_ERR_INVALID_ARG, "config->size is " + std::to_string(config->size) +
                                                  ", expected " + std::to_string(sizeof(collx_dp_config_t)) +
                                                  " (call collx_dp_config_init)");
  std::string why = check_config(*config);
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
  if (grad_buffer) {
    dp->buffer = static_cast<float*>(grad_buffer);
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
  for (size_t b = 0; b < layout->buckets.size(); ++b) {
    dp->buckets[b].start = layout->buckets[b].start;
    dp->buckets[b].padded = layout->buckets[b].padded;
    if (is_half_type(config->comm_dtype)) dp->buckets[b].staging.assign(layout->buckets[b].padded, 0);
  }
  for (const auto& t : layout->tensors) dp->buckets[t.bucket].num_tensors++;
  for (auto& b : dp->buckets) b.pending = b.num_tensors;
  try {
    if (is_half_type(config->comm_dtype)) dp->helper.reset(new DpHelper(dp));
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

collx_status_t dp_start_bucket(collx_dp_t dp, size_t b, std::string* why) {
  collx_dp_s::Bucket& bk = dp->buckets[b];
  if (bk.padded == 0) return COLLX_OK;
  float* data = dp->buffer + bk.start;
  const bool half = is_half_type(dp->config.comm_dtype);
  void* wire = data;
  if (half) {
    pack_half(data, bk.staging.data(), bk.padded, dp->pre, dp->config.comm_dtype);
    wire = bk.staging.data();
  } else {
    scale_in_place(data, bk.padded, dp->pre);
  }
  const auto dt = static_cast<collx_datatype_t>(dp->config.comm_dtype);
  collx_status_t st;
  if (dp->config.mode == COLLX_DP_ALLREDUCE) {
    st = collx_iallreduce(wire, wire, bk.padded, dt, COLLX_SUM, dp->comm, nullptr, &bk.request);
  } else {
    const size_t share = bk.padded / static_cast<size_t>(dp->size);
    char* recv = static_cast<char*>(wire) + static_cast<size_t>(dp->rank) * share * (half ? 2 : 4);
    st = collx_ireduce_scatter(wire, recv, share, dt, COLLX_SUM, dp->comm, nullptr, &bk.request);
  }
  if (st != COLLX_OK) {
    bk.request = nullptr;
    *why = "launching bucket " + std::to_string(b) + " failed: " + comm_error(dp->comm, st);
  }
  return st;
}

// The whole bucket (all-reduce) or this rank's owner range (reduce-scatter).
void dp_complete_bucket(collx_dp_t dp, collx_dp_s::Bucket& bk) {
  size_t from = 0, n = bk.padded;
  if (dp->config.mode == COLLX_DP_REDUCE_SCATTER) {
    n = bk.padded / static_cast<size_t>(dp->size);
    from = static_cast<size_t>(dp->rank) * n;
  }
  float* data = dp->buffer + bk.start + from;
  if (is_half_type(dp->config.comm_dtype))
    unpack_half(bk.staging.data() + from, data, n, dp->post, dp->config.comm_dtype);
  else
    scale_in_place(data, n, dp->post);
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
  if (!config || size < sizeof(collx_dp_config_t)) return COLLX_ERR_INVALID_ARG;
  std::memset(config, 0, sizeof(collx_dp_config_t));
  config->size = size;
  config->mode = COLLX_DP_ALLREDUCE;
  config->average = 1;
  config->predivide = 0.0;
  config->comm_dtype = COLLX_FLOAT32;
  config->allow_unused = 0;
  config->check_marks = 1;
  config->timeout_ms = 60000;
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
  auto it = dp->layout->index.find(tensor_id);
  if (it == dp->layout->index.end())
    return dp_fail(dp, COLLX_ERR_INVALID_ARG,
                   "collx_dp_grad_ptr: tensor " + std::to_string(tensor_id) + " is not in the layout");
  *grad = dp->buffer + dp->layout->tensors[it->second].offset;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_dp_buffer(collx_dp_t dp, float** buffer, size_t* count) {
  if (!dp) return COLLX_ERR_INVALID_ARG;
  if (buffer) *buffer = dp->buffer;
  if (count) *count = dp->total;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_dp_bucket_state(collx_dp_t dp, size_t bucket, size_t* pending,
                                               int32_t* launched) {
  if (!dp) return COLLX_ERR_INVALID_ARG;
  if (bucket >= dp->buckets.size())
    return dp_fail(dp, COLLX_ERR_INVALID_ARG,
                   "collx_dp_bucket_state: bucket " + std::to_string(bucket) + " of " +
                       std::to_string(dp->buckets.size()));
  if (pending) *pending = dp->buckets[bucket].pending;
  if (launched) *launched = dp->buckets[bucket].launched ? 1 : 0;
  return COLLX_OK;
}

COLLX_API const char* collx_dp_last_error(collx_dp_t dp) {
  if (!dp) return collx::parallel::thread_create_error(collx::parallel::Handle::kDp).c_str();
  return dp->error.get();
}

}  // extern "C"
