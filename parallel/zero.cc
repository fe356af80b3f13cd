// ZeRO: configuration, creation (owned segments, shard buffers), views, checkpoint pieces
// and the shard norm. Loading and exporting state is zero_state.cc.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "parallel/free_calls.h"
#include "parallel/norm_rules.h"
#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {

namespace {

constexpr int32_t kMaxPrefetchDepth = 1024;
// Size of the config before the prefetch-plan fields: callers compiled then get defaults.
constexpr size_t kConfigSizeV1 = offsetof(collx_zero_config_t, prefetch_depth);

void set_defaults(collx_zero_config_t* c) {
  std::memset(c, 0, sizeof(collx_zero_config_t));
  c->size = sizeof(collx_zero_config_t);
  c->stage = -1;  // no default: the caller chooses
  c->comm_dtype = COLLX_FLOAT32;
  c->optimizer = COLLX_OPT_ADAMW;
  c->lr = 1e-3;
  c->beta1 = 0.9;
  c->beta2 = 0.999;
  c->eps = 1e-8;
  c->timeout_ms = 60000;
  c->prefetch_depth = 2;
  c->prefetch_bytes = size_t{64} << 20;
  c->mem_kind = COLLX_MEM_HOST;
  c->offload = 0;
  c->param_dtype = COLLX_FLOAT32;
  c->grad_dtype = COLLX_FLOAT32;
  c->stream = nullptr;
}

bool float_or_half(int32_t dt) { return dt == COLLX_FLOAT32 || dt == COLLX_BFLOAT16 || dt == COLLX_FLOAT16; }

collx_status_t zero_create_fail(collx_status_t st, const std::string& msg) {
  return collx::parallel::create_fail("collx_zero_create", st, msg);
}

std::string check_config(const collx_zero_config_t& c) {
  if (c.stage < 0 || c.stage > 3) return "config->stage is " + std::to_string(c.stage) + " (0, 1, 2 or 3; collx_zero_config_init leaves it unset)";
  if (c.deterministic != 0 && c.deterministic != 1) return "config->deterministic must be 0 or 1";
  if (c.deterministic && c.stage != 2) return "config->deterministic is for stage 2 only";
  if (c.comm_dtype != COLLX_FLOAT32 && c.comm_dtype != COLLX_BFLOAT16 && c.comm_dtype != COLLX_FLOAT16)
    return "config->comm_dtype must be COLLX_FLOAT32, COLLX_BFLOAT16 or COLLX_FLOAT16";
  if (c.optimizer < COLLX_OPT_NONE || c.optimizer > COLLX_OPT_ADAMW)
    return "config->optimizer is " + std::to_string(c.optimizer) + " (COLLX_OPT_NONE, _SGD or _ADAMW)";
  if (!(c.lr >= 0) || !(c.eps > 0) || !(c.beta1 >= 0 && c.beta1 < 1) || !(c.beta2 >= 0 && c.beta2 < 1) ||
      !(c.weight_decay >= 0) || !(c.momentum >= 0))
    return "config->lr, eps, beta1, beta2, weight_decay or momentum is out of range";
  if (c.prefetch_depth < 0 || c.prefetch_depth > kMaxPrefetchDepth)
    return "config->prefetch_depth is " + std::to_string(c.prefetch_depth) + " (0 = no prefetch plan, up to " +
           std::to_string(kMaxPrefetchDepth) + ")";
  if (c.mem_kind != COLLX_MEM_AUTO && c.mem_kind != COLLX_MEM_HOST && c.mem_kind != COLLX_MEM_CUDA)
    return "config->mem_kind is " + std::to_string(c.mem_kind) + " (COLLX_MEM_HOST or COLLX_MEM_CUDA)";
  if (c.offload != 0 && c.offload != 1) return "config->offload must be 0 or 1";
  if (c.offload && c.mem_kind != COLLX_MEM_CUDA)
    return "config->offload = 1 is for device buffers (config->mem_kind COLLX_MEM_CUDA); host buffers are "
           "already on the host";
  if (!float_or_half(c.param_dtype) || !float_or_half(c.grad_dtype))
    return "config->param_dtype and grad_dtype must be COLLX_FLOAT32, COLLX_BFLOAT16 or COLLX_FLOAT16";
  if (c.stage == 3 && c.prefetch_depth > 0 && c.prefetch_bytes && c.prefetch_bytes < sizeof(float))
    return "config->prefetch_bytes is " + std::to_string(c.prefetch_bytes) +
           ": too small for one element (0 = no byte budget)";
  return "";
}

std::string check_layout(collx_layout_t l, int32_t size, int32_t stage) {
  std::string why = float_layout_problem(l, size);
  const int32_t want = stage == 3 ? COLLX_PART_PER_TENSOR : COLLX_PART_FLAT;
  if (why.empty() && l->config.partition != want)
    why = std::string("stage ") + std::to_string(stage) + " needs a " +
          (stage == 3 ? "COLLX_PART_PER_TENSOR" : "COLLX_PART_FLAT") + " layout";
  return why;
}

// The owned segments: one owner range per bucket (FLAT), one chunk per tensor (PER_TENSOR),
// every whole bucket (stage 0).
void plan_segments(collx_zero_t z) {
  const collx_layout_t l = z->layout;
  const size_t w = static_cast<size_t>(z->size), r = static_cast<size_t>(z->rank);
  size_t shard = 0;
  auto add = [&](size_t start, size_t padded) {
    const size_t share = padded / w;
    z->segments.push_back({start + r * share, shard, share});
    shard += share;
  };
  if (z->config.stage == 3) {
    for (size_t i = 0; i < l->tensors.size(); ++i) {
      z->tensor_segment.push_back(i);
      add(l->tensors[i].offset, l->tensors[i].padded);
    }
  } else if (z->config.stage == 0) {
    for (const auto& b : l->buckets) {
      z->segments.push_back({b.start, shard, b.padded});
      shard += b.padded;
    }
    for (const auto& t : l->tensors) z->tensor_segment.push_back(t.bucket);
  } else {
    for (const auto& b : l->buckets) add(b.start, b.padded);
    for (const auto& t : l->tensors) z->tensor_segment.push_back(t.bucket);
  }
  z->shard_count = shard;
}

collx_status_t create(collx_comm_t comm, collx_layout_t layout, const collx_zero_config_t* config,
                      collx_zero_t* out) {
  if (!out) return zero_create_fail(COLLX_ERR_INVALID_ARG, "z (output) is NULL");
  *out = nullptr;
  if (!comm || !layout || !config) return zero_create_fail(COLLX_ERR_INVALID_ARG, "dp_comm, layout or config is NULL");
  if (config->size < kConfigSizeV1)
    return zero_create_fail(COLLX_ERR_INVALID_ARG, "config->size is too small (call collx_zero_config_init)");
  collx_zero_config_t cfg;
  set_defaults(&cfg);
  std::memcpy(&cfg, config, std::min(config->size, sizeof cfg));
  cfg.size = sizeof cfg;
  config = &cfg;
  std::string why = check_config(*config);
  if (!why.empty()) return zero_create_fail(COLLX_ERR_INVALID_ARG, why);
  why = zero_device_unsupported(*config);
  if (!why.empty()) return zero_create_fail(COLLX_ERR_UNSUPPORTED, why);
  int32_t rank = 0, size = 0;
  collx_status_t st = collx_comm_rank(comm, &rank);
  if (st == COLLX_OK) st = collx_comm_size(comm, &size);
  if (st != COLLX_OK) return zero_create_fail(st, comm_error(comm, st));
  why = check_layout(layout, size, config->stage);
  if (!why.empty()) return zero_create_fail(COLLX_ERR_INVALID_ARG, why);

  auto z = std::make_unique<collx_zero_s>();
  z->comm = comm;
  z->rank = rank;
  z->size = size;
  z->layout = layout;
  z->config = *config;
  z->plan.stats.state = config->stage == 3 && config->prefetch_depth > 0 ? 1 : 0;  // recording
  plan_segments(z.get());
  if (config->mem_kind != COLLX_MEM_CUDA || config->offload) {  // else on the device (zero_device_init)
    z->master.assign(z->shard_count, 0.0f);
    z->grad.assign(z->shard_count, 0.0f);
    if (config->optimizer != COLLX_OPT_NONE) z->exp_avg.assign(z->shard_count, 0.0f);
    if (config->optimizer == COLLX_OPT_ADAMW) z->exp_avg_sq.assign(z->shard_count, 0.0f);
  }
  if (config->mem_kind == COLLX_MEM_CUDA) {
    st = zero_device_init(z.get());
    if (st != COLLX_OK) return zero_create_fail(st, z->error.get());
  } else if (config->stage < 3) {
    z->params.assign(layout->total, 0.0f);
  }
  if (config->stage == 2) zero2_init(z.get());
  if (config->stage < 2) {
    if (!z->device) z->grad_buffer.assign(layout->total, 0.0f);
    collx_dp_config_t dc;
    collx_dp_config_init(&dc, sizeof dc);
    dc.mode = config->stage == 0 ? COLLX_DP_ALLREDUCE : COLLX_DP_REDUCE_SCATTER;
    dc.comm_dtype = config->comm_dtype;
    dc.timeout_ms = config->timeout_ms;
    dc.mem_kind = z->device ? COLLX_MEM_CUDA : COLLX_MEM_HOST;
    dc.grad_dtype = config->grad_dtype;
    dc.stream = z->stream;
    void* buffer = z->device ? z->grad_buffer_dev.get() : z->grad_buffer.data();
    st = collx_dp_create(comm, layout, &dc, buffer, &z->dp);
    if (st != COLLX_OK) return zero_create_fail(st, collx_dp_last_error(nullptr));
  }
  *out = z.release();
  return COLLX_OK;
}

// Stage 0 keeps the whole gradient on every rank: only dp rank 0 counts it, so that the
// sum over DP is the norm, as for the sharded stages.
collx_status_t norm_sq(collx_zero_t z, int32_t tp_rank, int32_t shared, double* out) {
  double s = 0;
  std::vector<std::pair<size_t, size_t>> ranges;  // device state: summed by a kernel, same order
  for (size_t pos = 0; pos < z->layout->tensors.size() && (z->config.stage || !z->rank); ++pos) {
    const auto& t = z->layout->tensors[pos];
    if (!counts_in_norm(t.flags, tp_rank, shared)) continue;
    size_t own_off = 0, boff = 0, n = 0;
    zero_owned(z, pos, &own_off, &boff, &n);
    if (!n) continue;
    if (z->device_state) {
      ranges.emplace_back(zero_shard_offset(z, pos, boff), n);
      continue;
    }
    const float* g = z->grad.data() + zero_shard_offset(z, pos, boff);
    for (size_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  }
  if (z->device_state) return zero_device_norm(z, ranges, out);
  *out = s;
  return COLLX_OK;
}

}  // namespace

collx_status_t zero_fail(collx_zero_t z, collx_status_t st, const std::string& msg) {
  if (z) z->error.set(msg);
  return st;
}

collx_status_t zero_find(collx_zero_t z, uint64_t id, const char* fn, size_t* pos) {
  auto it = z->layout->index.find(id);
  if (it == z->layout->index.end())
    return zero_fail(z, COLLX_ERR_INVALID_ARG, std::string(fn) + ": tensor " + std::to_string(id) + " is not in the layout");
  *pos = it->second;
  return COLLX_OK;
}

void zero_owned(collx_zero_t z, size_t pos, size_t* own_off, size_t* boff, size_t* n) {
  const auto& t = z->layout->tensors[pos];
  if (z->config.stage == 0) {
    *own_off = 0;
    *boff = t.offset;
    *n = t.numel;
    return;
  }
  collx_layout_tensor_shard(z->layout, t.id, z->rank, own_off, boff, n);
}

size_t zero_shard_offset(collx_zero_t z, size_t pos, size_t boff) {
  const auto& seg = z->segments[z->tensor_segment[pos]];
  return seg.shard_offset + (boff - seg.buffer_offset);
}

size_t zero_chunk(collx_zero_t z, size_t pos) {
  return z->layout->tensors[pos].padded / static_cast<size_t>(z->size);
}

bool zero_persistent(collx_zero_t z, size_t pos) {
  const auto& t = z->layout->tensors[pos];
  return t.numel <= z->config.persist_elems || (t.flags & COLLX_TENSOR_PERSISTENT);
}

}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_zero_config_init(collx_zero_config_t* config, size_t size) {
  if (!config || size < kConfigSizeV1)
    return collx::parallel::refuse_arg(nullptr, "collx_zero_config_init", "config is NULL or size is too small (pass sizeof the struct)");
  collx_zero_config_t c;
  set_defaults(&c);
  c.size = size;
  std::memcpy(config, &c, std::min(size, sizeof c));  // a caller's older, shorter struct
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_create(collx_comm_t dp_comm, collx_layout_t layout,
                                           const collx_zero_config_t* config, collx_zero_t* z) {
  return guarded([&] { return create(dp_comm, layout, config, z); },
                 [&](const std::string& m) { zero_create_fail(COLLX_OK, m); });
}

COLLX_API collx_status_t collx_zero_destroy(collx_zero_t z) {
  if (!z) return COLLX_OK;
  for (auto& g : z->in_flight) {
    collx_wait(g.request, -1);
    collx_request_free(g.request);
  }
  zero2_drain(z);
  collx_dp_destroy(z->dp);
  delete z;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_param_ptr(collx_zero_t z, uint64_t tensor_id, float** param) {
  if (!z || !param) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_param_ptr: z or param is NULL");
  const std::string refusal =
      collx::parallel::float32_only_refusal("collx_zero_param_ptr", "parameters", "param_dtype", z->config.param_dtype, "collx_zero_param_view");
  if (!refusal.empty()) return zero_fail(z, COLLX_ERR_INVALID_USAGE, refusal);
  void* view = nullptr;
  const collx_status_t st = collx_zero_param_view(z, tensor_id, &view, nullptr);
  if (st == COLLX_OK) *param = static_cast<float*>(view);
  return st;
}

COLLX_API collx_status_t collx_zero_param_view(collx_zero_t z, uint64_t tensor_id, void** param, int32_t* dtype) {
  return zero_call(z, "collx_zero_param_view", [&]() -> collx_status_t {
    size_t pos = 0;
    collx_status_t st = zero_find(z, tensor_id, "collx_zero_param_view", &pos);
    if (st != COLLX_OK || !param) return st != COLLX_OK ? st : COLLX_ERR_INVALID_ARG;
    if (dtype) *dtype = z->config.param_dtype;
    if (z->config.stage < 3) {
      *param = zero_params(z) + z->layout->tensors[pos].offset * zero_param_size(z);
      return COLLX_OK;
    }
    st = zero3_complete_ids(z, {tensor_id});  // plan prefetches behind it go on
    if (st != COLLX_OK) return st;
    auto it = z->gathered.find(tensor_id);
    if (it == z->gathered.end())
      return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                       "collx_zero_param_view: tensor " + std::to_string(tensor_id) +
                           " is not gathered (stage 3: call collx_zero3_fetch first)");
    *param = it->second.data();
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_zero_shard(collx_zero_t z, float** master, float** grad, size_t* count) {
  if (!z) return collx::parallel::refuse_arg(z, "collx_zero_shard", "z is NULL");
  if (master) *master = zero_master(z);
  if (grad) *grad = zero_grad_shard(z);
  if (count) *count = z->shard_count;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_pieces(collx_zero_t z, collx_zero_piece_t* pieces, size_t cap, size_t* n) {
  if (!z || !n) return collx::parallel::refuse_arg(z, "collx_zero_pieces", "z or n is NULL");
  size_t k = 0;
  for (size_t pos = 0; pos < z->layout->tensors.size(); ++pos) {
    const auto& t = z->layout->tensors[pos];
    size_t own_off = 0, boff = 0, cnt = 0;
    zero_owned(z, pos, &own_off, &boff, &cnt);
    if (!cnt) continue;
    if (pieces && k < cap) pieces[k] = {t.id, own_off, zero_shard_offset(z, pos, boff), cnt};
    ++k;
  }
  *n = k;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_grad_norm_sq(collx_zero_t z, int32_t tp_rank, int32_t count_shared,
                                                 double* sumsq) {
  if (!z || !sumsq) return collx::parallel::refuse_arg(z, "collx_zero_grad_norm_sq", "z or sumsq is NULL");
  return zero_call(z, "collx_zero_grad_norm_sq", [&] { return norm_sq(z, tp_rank, count_shared, sumsq); });
}

COLLX_API const char* collx_zero_last_error(collx_zero_t z) {
  if (!z) return thread_error().c_str();
  return z->error.get();
}

}  // extern "C"
