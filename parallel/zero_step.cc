// ZeRO optimizer step on the float32 master shard (SGD, AdamW as torch.optim computes
// them) and publish: the updated parameters all-gathered to every rank.
#include <algorithm>
#include <cmath>

#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {
namespace {

void sgd(collx_zero_t z, float gs) {
  const collx_zero_config_t& c = z->config;
  const float lr = static_cast<float>(c.lr), wd = static_cast<float>(c.weight_decay);
  const float mom = static_cast<float>(c.momentum);
  for (size_t i = 0; i < z->shard_count; ++i) {
    float g = gs == 1.0f ? z->grad[i] : z->grad[i] * gs;
    if (wd != 0.0f) g += wd * z->master[i];
    if (mom != 0.0f) {
      z->exp_avg[i] = z->steps == 1 ? g : mom * z->exp_avg[i] + g;
      g = z->exp_avg[i];
    }
    z->master[i] -= lr * g;
  }
}

void adamw(collx_zero_t z, float gs) {
  const collx_zero_config_t& c = z->config;
  const double t = static_cast<double>(z->steps);
  const float lr = static_cast<float>(c.lr), wd = static_cast<float>(c.weight_decay);
  const float b1 = static_cast<float>(c.beta1), b2 = static_cast<float>(c.beta2), eps = static_cast<float>(c.eps);
  const float step_size = static_cast<float>(c.lr / (1.0 - std::pow(c.beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, t)));
  for (size_t i = 0; i < z->shard_count; ++i) {
    const float g = gs == 1.0f ? z->grad[i] : z->grad[i] * gs;
    float& p = z->master[i];
    if (wd != 0.0f) p *= 1.0f - lr * wd;
    z->exp_avg[i] = b1 * z->exp_avg[i] + (1.0f - b1) * g;
    z->exp_avg_sq[i] = b2 * z->exp_avg_sq[i] + (1.0f - b2) * g * g;
    const float denom = std::sqrt(z->exp_avg_sq[i]) / bc2_sqrt + eps;
    p -= step_size * (z->exp_avg[i] / denom);
  }
}

collx_status_t step(collx_zero_t z, double grad_scale) {
  if (z->config.optimizer == COLLX_OPT_NONE)
    return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                     "collx_zero_step: config.optimizer is COLLX_OPT_NONE; update collx_zero_shard yourself");
  if (!std::isfinite(grad_scale))
    return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_step: grad_scale is not finite (an overflow: skip the step)");
  z->steps++;
  const float gs = static_cast<float>(grad_scale);
  if (z->device_state) return zero_device_step(z, gs);  // queued on the stream
  if (z->config.optimizer == COLLX_OPT_SGD)
    sgd(z, gs);
  else
    adamw(z, gs);
  std::fill(z->grad.begin(), z->grad.end(), 0.0f);
  return COLLX_OK;
}

// Stages 1, 2: owned slice of each bucket from the master, then one in-place all-gather
// per bucket (launched together, waited together). Stage 0: the copy only.
collx_status_t publish_flat(collx_zero_t z) {
  std::vector<collx_request_t> reqs;
  collx_status_t st = z->device ? zero_device_publish_copy(z) : COLLX_OK;
  if (st != COLLX_OK) return st;
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.mem_kind = z->device ? COLLX_MEM_CUDA : COLLX_MEM_HOST;
  opts.stream = z->stream;
  char* params = zero_params(z);
  const size_t es = zero_param_size(z);
  const auto dt = static_cast<collx_datatype_t>(z->config.param_dtype);
  for (size_t b = 0; b < z->segments.size() && st == COLLX_OK; ++b) {
    const auto& seg = z->segments[b];
    if (!seg.count) continue;
    if (!z->device) std::copy_n(z->master.data() + seg.shard_offset, seg.count, z->params.data() + seg.buffer_offset);
    if (z->config.stage == 0) continue;  // every rank holds the whole model
    collx_request_t r = nullptr;
    st = collx_iallgather(params + seg.buffer_offset * es, params + z->layout->buckets[b].start * es, seg.count, dt,
                          z->comm, &opts, &r);
    if (st == COLLX_OK) reqs.push_back(r);
  }
  for (collx_request_t r : reqs) {
    collx_status_t w = collx_wait(r, z->config.timeout_ms);
    if (w == COLLX_IN_PROGRESS) w = COLLX_ERR_TIMEOUT;
    if (st == COLLX_OK) st = w;
    // Also when still running: it goes on without its handle (which would otherwise leak,
    // and with it the communicator).
    collx_request_free(r);
  }
  if (st != COLLX_OK) return zero_fail(z, st, "collx_zero_publish: " + comm_error(z->comm, st));
  return COLLX_OK;
}

// Stage 3: the shards are the parameters; only the persistent tensors are re-gathered.
collx_status_t publish_stage3(collx_zero_t z) {
  collx_status_t st = zero3_complete_all(z);
  if (st == COLLX_OK) st = zero3_plan_evict(z, {});  // unused plan prefetches are not the engine's
  if (st != COLLX_OK) return st;
  std::vector<uint64_t> persistent;
  for (size_t pos = 0; pos < z->layout->tensors.size(); ++pos) {
    const uint64_t id = z->layout->tensors[pos].id;
    if (!z->gathered.count(id)) continue;
    if (!zero_persistent(z, pos))
      return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                       "collx_zero_publish: tensor " + std::to_string(id) +
                           " is still gathered; collx_zero3_release it before the step");
  }
  st = zero3_plan_step_end(z);
  if (st != COLLX_OK) return st;
  for (size_t pos = 0; pos < z->layout->tensors.size(); ++pos)
    if (zero_persistent(z, pos)) persistent.push_back(z->layout->tensors[pos].id);
  for (uint64_t id : persistent) zero3_drop(z, id);
  return zero3_fetch_unplanned(z, persistent.data(), persistent.size());
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_zero_step(collx_zero_t z, double grad_scale) {
  return zero_call(z, "collx_zero_step", [&] { return step(z, grad_scale); });
}

COLLX_API collx_status_t collx_zero_publish(collx_zero_t z) {
  return zero_call(z, "collx_zero_publish", [&] { return z->config.stage == 3 ? publish_stage3(z) : publish_flat(z); });
}

}  // extern "C"
