// Dynamic loss scaler: DeepSpeed's DynamicLossScaler state machine (hysteresis before a
// backoff, growth after a window of clean steps), which Megatron's DynamicGradScaler
// matches with its own defaults.
#include <algorithm>
#include <cmath>

#include "parallel/free_calls.h"
#include "parallel/parallel_internal.h"

struct collx_scaler_s {
  collx_scaler_config_t config{};
  collx_scaler_state_t state{};
  collx::parallel::ErrorSlot error;
};

namespace collx {
namespace parallel {
namespace {

collx_status_t scaler_fail(collx_scaler_t s, collx_status_t st, const std::string& msg) {
  if (s) {
    s->error.set(msg);
    return st;
  }
  thread_error() = msg;
  return st;
}

std::string check(const collx_scaler_config_t& c) {
  if (!(c.init_scale > 0) || std::isinf(c.init_scale)) return "init_scale must be finite and > 0";
  if (!(c.growth > 1) || std::isinf(c.growth)) return "growth must be finite and > 1";
  if (!(c.backoff > 0 && c.backoff < 1)) return "backoff must be in (0, 1)";
  if (c.window < 1) return "window must be >= 1";
  if (c.hysteresis < 1) return "hysteresis must be >= 1";
  if (!(c.min_scale > 0) || c.min_scale > c.init_scale) return "min_scale must be in (0, init_scale]";
  if (c.consecutive_hysteresis != 0 && c.consecutive_hysteresis != 1) return "consecutive_hysteresis must be 0 or 1";
  if (c.error_at_min != 0 && c.error_at_min != 1) return "error_at_min must be 0 or 1";
  return "";
}

collx_status_t update(collx_scaler_t s, int32_t found_inf, int32_t* skip) {
  const collx_scaler_config_t& c = s->config;
  collx_scaler_state_t& st = s->state;
  if (found_inf) {
    if (c.hysteresis == 1 || st.hysteresis_left <= 1) {
      if (st.scale <= c.min_scale && c.error_at_min)
        return scaler_fail(s, COLLX_ERR_INVALID_USAGE,
                           "collx_scaler_update: overflow with the loss scale already at its minimum " +
                               std::to_string(c.min_scale) +
                               " (the gradients overflow at any scale: check the model, or use bf16)");
      st.scale = std::max(st.scale * c.backoff, c.min_scale);
    } else {
      st.hysteresis_left--;
    }
    st.last_overflow = st.iteration;
  } else {
    if (c.consecutive_hysteresis) st.hysteresis_left = c.hysteresis;
    const int64_t stable = st.iteration - st.last_overflow - 1;
    if (stable > 0 && stable % c.window == 0) {
      if (!c.consecutive_hysteresis) st.hysteresis_left = c.hysteresis;
      st.scale *= c.growth;
    }
  }
  st.iteration++;
  *skip = found_inf ? 1 : 0;
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using collx::parallel::scaler_fail;

extern "C" {

COLLX_API collx_status_t collx_scaler_config_init(collx_scaler_config_t* config, size_t size) {
  if (!config || size < sizeof(collx_scaler_config_t))
    return collx::parallel::refuse_arg(nullptr, "collx_scaler_config_init", "config is NULL or size is too small (pass sizeof the struct)");
  std::memset(config, 0, sizeof(collx_scaler_config_t));
  config->size = size;
  config->init_scale = 65536.0;
  config->growth = 2.0;
  config->backoff = 0.5;
  config->window = 1000;
  config->hysteresis = 2;
  config->consecutive_hysteresis = 0;
  config->min_scale = 1.0;
  config->error_at_min = 1;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_scaler_create(const collx_scaler_config_t* config, collx_scaler_t* scaler) {
  if (!scaler || !config)
    return scaler_fail(nullptr, COLLX_ERR_INVALID_ARG, "collx_scaler_create: config or scaler is NULL");
  *scaler = nullptr;
  if (config->size < sizeof(collx_scaler_config_t))
    return scaler_fail(nullptr, COLLX_ERR_INVALID_ARG,
                       "collx_scaler_create: config->size is too small (call collx_scaler_config_init)");
  std::string why = collx::parallel::check(*config);
  if (!why.empty()) return scaler_fail(nullptr, COLLX_ERR_INVALID_ARG, "collx_scaler_create: config->" + why);
  auto s = new (std::nothrow) collx_scaler_s();
  if (!s) return scaler_fail(nullptr, COLLX_ERR_NO_MEMORY, "collx_scaler_create: out of memory");
  s->config = *config;
  s->state.size = sizeof(collx_scaler_state_t);
  s->state.scale = config->init_scale;
  s->state.iteration = 0;
  s->state.last_overflow = -1;
  s->state.hysteresis_left = config->hysteresis;
  *scaler = s;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_scaler_destroy(collx_scaler_t scaler) {
  delete scaler;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_scaler_scale(collx_scaler_t scaler, double* scale) {
  if (!scaler || !scale) return collx::parallel::refuse_arg(scaler, "collx_scaler_scale", "scaler or scale is NULL");
  *scale = scaler->state.scale;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_scaler_update(collx_scaler_t scaler, int32_t found_inf, int32_t* skip_step) {
  if (!scaler || !skip_step)
    return scaler_fail(scaler, COLLX_ERR_INVALID_ARG, "collx_scaler_update: scaler or skip_step is NULL");
  return collx::parallel::update(scaler, found_inf, skip_step);
}

COLLX_API collx_status_t collx_scaler_get_state(collx_scaler_t scaler, collx_scaler_state_t* state) {
  if (!scaler || !state || state->size < sizeof(collx_scaler_state_t))
    return scaler_fail(scaler, COLLX_ERR_INVALID_ARG,
                       "collx_scaler_get_state: scaler or state is NULL, or state->size is too small");
  *state = scaler->state;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_scaler_set_state(collx_scaler_t scaler, const collx_scaler_state_t* state) {
  if (!scaler || !state || state->size < sizeof(collx_scaler_state_t))
    return scaler_fail(scaler, COLLX_ERR_INVALID_ARG,
                       "collx_scaler_set_state: scaler or state is NULL, or state->size is too small");
  if (!(state->scale >= scaler->config.min_scale) || std::isinf(state->scale) || state->iteration < 0 ||
      state->last_overflow < -1 || state->hysteresis_left < 0)
    return scaler_fail(scaler, COLLX_ERR_INVALID_ARG, "collx_scaler_set_state: the state is out of range");
  scaler->state = *state;
  scaler->state.size = sizeof(collx_scaler_state_t);
  return COLLX_OK;
}

COLLX_API const char* collx_scaler_last_error(collx_scaler_t scaler) {
  if (!scaler) return collx::parallel::thread_error().c_str();
  return scaler->error.get();
}

}  // extern "C"
