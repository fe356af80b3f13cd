// ZeRO state for checkpoints and exact resume: the per-element state (master, moments)
// written back piece by piece at any dp size or consolidated whole, the step count, the
// learning rate, and the memory account.
#include <algorithm>
#include <cmath>

#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {
namespace {

const char* kind_name(int32_t kind) {
  switch (kind) {
    case COLLX_ZERO_MASTER: return "COLLX_ZERO_MASTER";
    case COLLX_ZERO_EXP_AVG: return "COLLX_ZERO_EXP_AVG";
    default: return "COLLX_ZERO_EXP_AVG_SQ";
  }
}

// The shard of `kind`, or an INVALID_ARG naming it when the optimizer keeps none.
// Device-resident state: the whole shard of `kind` copied into z->mirror (host), waited for.
collx_status_t state_of(collx_zero_t z, int32_t kind, const char* fn, collx_zero_s::Floats** out) {
  if (z->device_state) return zero_device_download(z, kind, fn, out);
  collx_zero_s::Floats* v = nullptr;
  if (kind == COLLX_ZERO_MASTER) v = &z->master;
  if (kind == COLLX_ZERO_EXP_AVG) v = &z->exp_avg;
  if (kind == COLLX_ZERO_EXP_AVG_SQ) v = &z->exp_avg_sq;
  if (!v) return zero_fail(z, COLLX_ERR_INVALID_ARG, std::string(fn) + ": kind " + std::to_string(kind) +
                                                         " is not a collx_zero_state_kind_t");
  if (v->size() != z->shard_count)
    return zero_fail(z, COLLX_ERR_INVALID_ARG,
                     std::string(fn) + ": this handle's optimizer keeps no " + kind_name(kind) +
                         " (optimizer " + std::to_string(z->config.optimizer) + ")");
  *out = v;
  return COLLX_OK;
}

collx_status_t load_state(collx_zero_t z, int32_t kind, uint64_t id, size_t toff, size_t count,
                          const float* values, const char* fn) {
  if (z->device_state && kind == COLLX_ZERO_MASTER) return zero_device_load_master(z, id, toff, count, values, fn);
  collx_zero_s::Floats* state = nullptr;
  collx_status_t st = state_of(z, kind, fn, &state);
  size_t pos = 0;
  if (st == COLLX_OK) st = zero_find(z, id, fn, &pos);
  if (st != COLLX_OK) return st;
  const auto& t = z->layout->tensors[pos];
  if (toff > t.numel || count > t.numel - toff)
    return zero_fail(z, COLLX_ERR_INVALID_ARG,
                     std::string(fn) + ": elements [" + std::to_string(toff) + ", " + std::to_string(toff + count) +
                         ") are outside tensor " + std::to_string(id) + " of " + std::to_string(t.numel));
  if (!values && count) return zero_fail(z, COLLX_ERR_INVALID_ARG, std::string(fn) + ": values is NULL");
  size_t own_off = 0, boff = 0, n = 0;
  zero_owned(z, pos, &own_off, &boff, &n);
  const size_t lo = std::max(own_off, toff), hi = std::min(own_off + n, toff + count);
  for (size_t i = lo; i < hi; ++i) (*state)[zero_shard_offset(z, pos, boff + (i - own_off))] = values[i - toff];
  if (z->device_state && lo < hi)  // the written range goes back up (contiguous in the shard)
    return zero_device_upload(z, kind, zero_shard_offset(z, pos, boff + (lo - own_off)), hi - lo, fn);
  if (kind == COLLX_ZERO_MASTER && z->device) return zero_device_load_params(z, t.offset + toff, values, count);
  if (kind == COLLX_ZERO_MASTER && !z->params.empty())
    std::copy(values, values + count, z->params.begin() + static_cast<long>(t.offset + toff));
  return COLLX_OK;
}

// Every rank contributes its owned part into a zeroed tensor; a SUM all-reduce adds only
// zeros to each element, so the result is exact. Stage 0 holds it all: a local copy.
collx_status_t full_state(collx_zero_t z, int32_t kind, uint64_t id, float* out, const char* fn) {
  collx_zero_s::Floats* state = nullptr;
  collx_status_t st = state_of(z, kind, fn, &state);
  size_t pos = 0;
  if (st == COLLX_OK) st = zero_find(z, id, fn, &pos);
  if (st != COLLX_OK) return st;
  const size_t numel = z->layout->tensors[pos].numel;
  if (!numel) return COLLX_OK;
  if (!out) return zero_fail(z, COLLX_ERR_INVALID_ARG, std::string(fn) + ": out is NULL");
  std::fill(out, out + numel, 0.0f);
  size_t own_off = 0, boff = 0, n = 0;
  zero_owned(z, pos, &own_off, &boff, &n);
  if (n) std::copy_n(state->data() + zero_shard_offset(z, pos, boff), n, out + own_off);
  if (z->config.stage == 0) return COLLX_OK;
  st = collx_allreduce(out, out, numel, COLLX_FLOAT32, COLLX_SUM, z->comm, nullptr);
  if (st != COLLX_OK) return zero_fail(z, st, std::string(fn) + ": " + comm_error(z->comm, st));
  return COLLX_OK;
}

// Stages 0 and 1 with a 16-bit wire type: the reducer's staging copies, read from its
// own buffers (allocated once at creation).
size_t reducer_staging_bytes(collx_zero_t z) {
  size_t bytes = 0;
  if (z->dp)
    for (const auto& b : z->dp->buckets) bytes += b.staging.capacity() * sizeof(uint16_t);
  return bytes;
}

collx_status_t memory(collx_zero_t z, collx_zero_memory_t* m) {
  if (!m || m->size < sizeof(collx_zero_memory_t))
    return zero_fail(z, COLLX_ERR_INVALID_ARG,
                     "collx_zero_memory: memory is NULL or memory->size is smaller than sizeof(collx_zero_memory_t)");
  const ZeroMemAccount& a = z->mem;
  const size_t staging = reducer_staging_bytes(z);
  const auto at = [](ZeroMem c) { return static_cast<int>(c); };
  m->params = a.now[at(ZeroMem::kParams)];
  m->grads = a.now[at(ZeroMem::kGrads)];
  m->optimizer = a.now[at(ZeroMem::kOptim)];
  m->comm = a.now[at(ZeroMem::kComm)] + staging;
  m->total = a.total + staging;
  m->peak_params = a.peak[at(ZeroMem::kParams)];
  m->peak_grads = a.peak[at(ZeroMem::kGrads)];
  m->peak_optimizer = a.peak[at(ZeroMem::kOptim)];
  m->peak_comm = a.peak[at(ZeroMem::kComm)] + staging;
  m->peak_total = a.peak_total + staging;
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_zero_load(collx_zero_t z, uint64_t tensor_id, size_t tensor_offset, size_t count,
                                         const float* values) {
  return zero_call(z, "collx_zero_load", [&] {
    return load_state(z, COLLX_ZERO_MASTER, tensor_id, tensor_offset, count, values, "collx_zero_load");
  });
}

COLLX_API collx_status_t collx_zero_load_state(collx_zero_t z, int32_t kind, uint64_t tensor_id, size_t tensor_offset,
                                               size_t count, const float* values) {
  return zero_call(z, "collx_zero_load_state", [&] {
    return load_state(z, kind, tensor_id, tensor_offset, count, values, "collx_zero_load_state");
  });
}

COLLX_API collx_status_t collx_zero_full_tensor(collx_zero_t z, uint64_t tensor_id, float* out) {
  return zero_call(z, "collx_zero_full_tensor",
                   [&] { return full_state(z, COLLX_ZERO_MASTER, tensor_id, out, "collx_zero_full_tensor"); });
}

COLLX_API collx_status_t collx_zero_full_state(collx_zero_t z, int32_t kind, uint64_t tensor_id, float* out) {
  return zero_call(z, "collx_zero_full_state",
                   [&] { return full_state(z, kind, tensor_id, out, "collx_zero_full_state"); });
}

COLLX_API collx_status_t collx_zero_state_shard(collx_zero_t z, int32_t kind, float** data, size_t* count) {
  return zero_call(z, "collx_zero_state_shard", [&] {
    collx_zero_s::Floats* state = nullptr;
    if (z->device_state) {  // the device shard itself (a device pointer)
      float* dev = zero_device_state(z, kind);
      if (!dev) return state_of(z, kind, "collx_zero_state_shard", &state);  // names what is wrong
      if (data) *data = dev;
      if (count) *count = z->shard_count;
      return COLLX_OK;
    }
    collx_status_t st = state_of(z, kind, "collx_zero_state_shard", &state);
    if (st != COLLX_OK) return st;
    if (data) *data = state->data();
    if (count) *count = z->shard_count;
    return COLLX_OK;
  });
}

COLLX_API collx_status_t collx_zero_get_step(collx_zero_t z, int64_t* step) {
  if (!z || !step) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_get_step: step is NULL");
  *step = z->steps;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_set_step(collx_zero_t z, int64_t step) {
  if (!z) return collx::parallel::refuse_arg(z, "collx_zero_set_step", "z is NULL");
  if (step < 0) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_set_step: step is negative");
  z->steps = step;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_set_lr(collx_zero_t z, double lr) {
  if (!z) return collx::parallel::refuse_arg(z, "collx_zero_set_lr", "z is NULL");
  if (!(lr >= 0) || std::isinf(lr))
    return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_set_lr: lr must be finite and >= 0");
  z->config.lr = lr;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_get_lr(collx_zero_t z, double* lr) {
  if (!z || !lr) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_get_lr: lr is NULL");
  *lr = z->config.lr;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero_memory(collx_zero_t z, collx_zero_memory_t* memory) {
  return zero_call(z, "collx_zero_memory", [&] { return collx::parallel::memory(z, memory); });
}

}  // extern "C"
