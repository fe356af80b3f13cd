// ZeRO stage 3 gather on demand: coalesced all-gathers of the owned chunks, sorted by
// tensor id so every rank issues the same collective whatever order it asks in, under a
// live-element limit; release drops the full copies. The prefetch plan is zero3_plan.cc.
#include <algorithm>

#include "lib/common/deadline.h"
#include "lib/cuda/device.h"
#include "parallel/low_precision.h"
#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {
namespace {

collx_status_t need_stage3(collx_zero_t z, const char* fn) {
  if (z->config.stage == 3) return COLLX_OK;
  return zero_fail(z, COLLX_ERR_INVALID_USAGE, std::string(fn) + " is for stage 3 only");
}

// Sorted, unique, valid ids.
collx_status_t sorted_ids(collx_zero_t z, const uint64_t* ids, size_t n, const char* fn, std::vector<uint64_t>* out) {
  if (!ids && n) return zero_fail(z, COLLX_ERR_INVALID_ARG, std::string(fn) + ": ids is NULL");
  out->assign(ids, ids + n);
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  for (uint64_t id : *out) {
    size_t pos = 0;
    collx_status_t st = zero_find(z, id, fn, &pos);
    if (st != COLLX_OK) return st;
  }
  return COLLX_OK;
}

// The ids of `v` neither gathered nor in flight, and their padded size.
std::vector<uint64_t> missing(collx_zero_t z, const std::vector<uint64_t>& v, size_t* elems) {
  std::vector<uint64_t> out;
  *elems = 0;
  for (uint64_t id : v) {
    if (z->gathered.count(id) || zero3_in_flight(z, id)) continue;
    out.push_back(id);
    *elems += z->layout->tensors[z->layout->index.at(id)].padded;
  }
  return out;
}

// Device buffers: each tensor's W chunks (a column of the rank-major blocks) copied into its
// own device allocation with one strided copy on the stream.
collx_status_t unpack_device(collx_zero_t z, const collx_zero_s::Gather& g) {
  const size_t block = g.elems, es = zero_param_size(z);
  size_t off = 0;
  for (uint64_t id : g.ids) {
    const size_t pos = z->layout->index.at(id);
    const size_t chunk = zero_chunk(z, pos), padded = z->layout->tensors[pos].padded;
    collx_zero_s::Gathered full;
    full.dev.reset(new DeviceMem());
    full.elems = padded;
    Status st = full.dev->allocate_zeroed(padded * es, z->stream);
    if (st.ok() && chunk)
      st = cuda::copy2d_async(full.dev->get(), chunk * es, static_cast<const char*>(g.drecv->get()) + off * es,
                              block * es, chunk * es, static_cast<size_t>(z->size), cuda::CopyKind::kDeviceToDevice,
                              z->stream);
    if (!st.ok()) return zero_fail(z, st.code(), "collx_zero3: unpacking a gather: " + st.message());
    z->mem.add(ZeroMem::kParams, padded * es);
    z->gathered[id] = std::move(full);
    off += chunk;
  }
  return COLLX_OK;
}

// Rebuilds each tensor of a finished gather from its W chunks.
collx_status_t unpack(collx_zero_t z, const collx_zero_s::Gather& g) {
  if (g.drecv) return unpack_device(z, g);
  const size_t block = g.send.size();
  size_t off = 0;
  for (uint64_t id : g.ids) {
    const size_t pos = z->layout->index.at(id);
    const size_t chunk = zero_chunk(z, pos);
    collx_zero_s::Gathered full;
    full.host = z->counted(ZeroMem::kParams);
    full.host.resize(z->layout->tensors[pos].padded);
    for (size_t r = 0; r < static_cast<size_t>(z->size); ++r)
      std::copy_n(g.recv.data() + r * block + off, chunk, full.host.data() + r * chunk);
    z->gathered[id] = std::move(full);
    off += chunk;
  }
  return COLLX_OK;
}

// Drops the oldest gather (device buffers: their bytes leave the account; freeing them waits
// for the stream).
void retire_front(collx_zero_t z) {
  z->mem.sub(ZeroMem::kComm, z->in_flight.front().device_bytes);
  z->in_flight.erase(z->in_flight.begin());
}

// Waits for the oldest gather in flight and unpacks it.
collx_status_t complete_front(collx_zero_t z, const Deadline& deadline) {
  collx_zero_s::Gather& g = z->in_flight.front();
  collx_status_t st = collx_wait(g.request, deadline.remaining_ms());
  if (st == COLLX_IN_PROGRESS)
    return zero_fail(z, COLLX_ERR_TIMEOUT, "collx_zero3: a gather of " + std::to_string(g.ids.size()) +
                                               " tensors did not finish within the deadline");
  collx_request_free(g.request);
  if (st == COLLX_OK) {
    st = unpack(z, g);
    if (st != COLLX_OK) {
      retire_front(z);
      return st;
    }
  }
  retire_front(z);
  if (st != COLLX_OK) return zero_fail(z, st, "collx_zero3: gather failed: " + comm_error(z->comm, st));
  return COLLX_OK;
}

// plan: a fetch the prefetch plan follows or records (publish's gathers are not).
collx_status_t fetch(collx_zero_t z, const uint64_t* ids, size_t n, bool wait, bool plan) {
  const char* fn = wait ? "collx_zero3_fetch" : "collx_zero3_prefetch";
  collx_status_t st = need_stage3(z, fn);
  std::vector<uint64_t> want;
  if (st == COLLX_OK) st = sorted_ids(z, ids, n, fn, &want);
  if (st != COLLX_OK) return st;
  plan = plan && wait;
  if (plan) zero3_plan_on_fetch(z, want);
  size_t elems = 0;
  std::vector<uint64_t> need = missing(z, want, &elems);
  if (wait && zero3_over_limit(z, elems)) st = zero3_plan_evict(z, want);  // plan prefetches make room
  if (st != COLLX_OK) return st;
  if (zero3_over_limit(z, elems)) {
    if (!wait) return COLLX_OK;  // a prefetch that does not fit is simply not issued
    return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                     std::string(fn) + ": gathering " + std::to_string(elems) + " more elements would hold " +
                         std::to_string(z->live + elems) + " live, above max_live_elems " +
                         std::to_string(z->config.max_live_elems) + " (release tensors first)");
  }
  st = zero3_launch(z, std::move(need), elems);
  if (st == COLLX_OK && plan) st = zero3_plan_prefetch(z);
  if (st != COLLX_OK || !wait) return st;
  return zero3_complete_ids(z, want);  // the plan's prefetch goes on behind this wait
}

collx_status_t release(collx_zero_t z, const uint64_t* ids, size_t n) {
  collx_status_t st = need_stage3(z, "collx_zero3_release");
  std::vector<uint64_t> v;
  if (st == COLLX_OK) st = sorted_ids(z, ids, n, "collx_zero3_release", &v);
  if (st == COLLX_OK) st = zero3_complete_ids(z, v);
  if (st != COLLX_OK) return st;
  for (uint64_t id : v)
    if (!zero_persistent(z, z->layout->index.at(id))) zero3_drop(z, id);
  return COLLX_OK;
}

}  // namespace

bool zero3_over_limit(collx_zero_t z, size_t elems) {
  return z->config.max_live_elems && z->live + elems > z->config.max_live_elems;
}

bool zero3_in_flight(collx_zero_t z, uint64_t id) {
  for (const auto& g : z->in_flight)
    if (std::binary_search(g.ids.begin(), g.ids.end(), id)) return true;
  return false;
}

// One all-gather of this rank's chunks of `ids`, concatenated: rank-major blocks.
collx_status_t zero3_launch(collx_zero_t z, std::vector<uint64_t> ids, size_t elems) {
  if (ids.empty()) return COLLX_OK;
  collx_zero_s::Gather g;
  g.send = z->counted(ZeroMem::kComm);
  g.recv = z->counted(ZeroMem::kComm);
  g.ids = std::move(ids);
  if (z->device) return zero3_launch_device(z, std::move(g), elems);
  for (uint64_t id : g.ids) {
    const size_t pos = z->layout->index.at(id);
    const float* chunk = z->master.data() + z->segments[z->tensor_segment[pos]].shard_offset;
    g.send.insert(g.send.end(), chunk, chunk + zero_chunk(z, pos));
  }
  g.recv.resize(g.send.size() * static_cast<size_t>(z->size));
  collx_status_t st =
      collx_iallgather(g.send.data(), g.recv.data(), g.send.size(), COLLX_FLOAT32, z->comm, nullptr, &g.request);
  if (st != COLLX_OK) return zero_fail(z, st, "collx_zero3: gather failed: " + comm_error(z->comm, st));
  z->live += elems;
  z->peak = std::max(z->peak, z->live);
  z->in_flight.push_back(std::move(g));
  return COLLX_OK;
}

collx_status_t zero3_launch_device(collx_zero_t z, collx_zero_s::Gather g, size_t elems) {
  for (uint64_t id : g.ids) g.elems += zero_chunk(z, z->layout->index.at(id));
  // 16-bit parameters travel and stay gathered in param_dtype, rounded from the master.
  const size_t es = zero_param_size(z);
  const auto pdt = static_cast<collx_datatype_t>(z->config.param_dtype);
  g.dsend.reset(new DeviceMem());
  g.drecv.reset(new DeviceMem());
  Status ds = g.dsend->allocate_zeroed(g.elems * es, z->stream);
  if (ds.ok()) ds = g.drecv->allocate_zeroed(g.elems * static_cast<size_t>(z->size) * es, z->stream);
  if (ds.ok() && !z->device_state) {  // offload: the chunks go up through pinned memory
    g.up.reset(new PinnedMem());
    ds = g.up->allocate(g.elems * es, z->stream);
  }
  size_t off = 0;
  for (size_t i = 0; ds.ok() && i < g.ids.size(); ++i) {
    const size_t pos = z->layout->index.at(g.ids[i]), chunk = zero_chunk(z, pos);
    const float* src = zero_master(z) + z->segments[z->tensor_segment[pos]].shard_offset;
    char* dst = static_cast<char*>(g.dsend->get()) + off * es;
    if (chunk && z->device_state) {
      ds = cuda::cast_scale(dst, pdt, src, COLLX_FLOAT32, chunk, 1.0f, z->stream);
    } else if (chunk) {
      char* up = reinterpret_cast<char*>(g.up->floats()) + off * es;
      if (es == sizeof(float))
        std::copy_n(src, chunk, reinterpret_cast<float*>(up));
      else
        pack_half(src, reinterpret_cast<uint16_t*>(up), chunk, 1.0f, pdt);
      ds = cuda::copy_async(dst, up, chunk * es, cuda::CopyKind::kHostToDevice, z->stream);
    }
    off += chunk;
  }
  if (!ds.ok()) return zero_fail(z, ds.code(), "collx_zero3: preparing a gather: " + ds.message());
  const collx_opts_t opts = device_opts(z->stream);
  collx_status_t st = collx_iallgather(g.dsend->get(), g.drecv->get(), g.elems, pdt, z->comm, &opts, &g.request);
  if (st != COLLX_OK) return zero_fail(z, st, "collx_zero3: gather failed: " + comm_error(z->comm, st));
  g.device_bytes = g.elems * es * (static_cast<size_t>(z->size) + (g.up ? 2 : 1));  // send, receive, upload
  z->mem.add(ZeroMem::kComm, g.device_bytes);
  z->live += elems;
  z->peak = std::max(z->peak, z->live);
  z->in_flight.push_back(std::move(g));
  return COLLX_OK;
}

void zero3_drop(collx_zero_t z, uint64_t id) {
  auto it = z->gathered.find(id);
  if (it == z->gathered.end()) return;
  z->live -= it->second.size();
  if (z->plan.speculative.erase(id)) z->plan.speculative_elems -= it->second.size();
  if (it->second.dev) z->mem.sub(ZeroMem::kParams, it->second.elems * zero_param_size(z));
  z->gathered.erase(it);
}

// Gathers complete in launch order (one communicator), so waiting for the oldest first
// never waits longer than needed for the ones asked for.
collx_status_t zero3_complete_ids(collx_zero_t z, const std::vector<uint64_t>& ids) {
  const Deadline deadline = Deadline::after_ms(z->config.timeout_ms);
  auto holds_one = [&] {
    for (uint64_t id : ids)
      if (zero3_in_flight(z, id)) return true;
    return false;
  };
  while (holds_one()) {
    collx_status_t st = complete_front(z, deadline);
    if (st != COLLX_OK) return st;
  }
  return COLLX_OK;
}

collx_status_t zero3_complete_all(collx_zero_t z) {
  const Deadline deadline = Deadline::after_ms(z->config.timeout_ms);
  while (!z->in_flight.empty()) {
    collx_status_t st = complete_front(z, deadline);
    if (st != COLLX_OK) return st;
  }
  return COLLX_OK;
}

collx_status_t zero3_fetch_unplanned(collx_zero_t z, const uint64_t* ids, size_t n) {
  return fetch(z, ids, n, true, false);
}

}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_zero3_prefetch(collx_zero_t z, const uint64_t* ids, size_t n) {
  return zero_call(z, "collx_zero3_prefetch", [&] { return fetch(z, ids, n, false, false); });
}

COLLX_API collx_status_t collx_zero3_fetch(collx_zero_t z, const uint64_t* ids, size_t n) {
  return zero_call(z, "collx_zero3_fetch", [&] { return fetch(z, ids, n, true, true); });
}

COLLX_API collx_status_t collx_zero3_release(collx_zero_t z, const uint64_t* ids, size_t n) {
  return zero_call(z, "collx_zero3_release", [&] { return release(z, ids, n); });
}

COLLX_API collx_status_t collx_zero3_live(collx_zero_t z, size_t* live, size_t* peak) {
  if (!z) return collx::parallel::refuse_arg(z, "collx_zero3_live", "z is NULL");
  if (live) *live = z->live;
  if (peak) *peak = z->peak;
  return COLLX_OK;
}

}  // extern "C"
