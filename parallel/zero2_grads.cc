// ZeRO stage 2 gradients without a full gradient buffer: a bucket takes a slot from a pool
// when its first view or mark of the micro-step needs it, is reduced as soon as it and
// every earlier bucket are complete (in index order, as DDP), its owned range is added
// into the float32 gradient shard, and the slot goes back to the pool. At most
// kMaxInFlight reductions run at once; a bucket that needs a slot beyond that waits for
// the oldest. Held: the shard plus the slots (two or three with marks in bucket order).
#include <algorithm>
#include <cstdint>

#include "lib/common/deadline.h"
#include "lib/cuda/device.h"
#include "parallel/low_precision.h"
#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {
namespace {

constexpr size_t kMaxInFlight = 2;

bool half_wire(collx_zero_t z) { return is_half_type(z->config.comm_dtype); }

// The slot's gradients: device memory (device buffers) or the host vector.
float* slot_data(collx_zero_s::Slot& s) { return s.dev ? static_cast<float*>(s.dev->get()) : s.data.data(); }

// Sum of the W owned ranges received (rank-major blocks) as a pairwise tree in rank order,
// in place into block 0: ((b0 + b1) + (b2 + b3)) for W = 4, so a rank at dp W/2 that
// holds b0 + b1 makes the same additions.
void tree_sum(float* blocks, size_t share, size_t w) {
  for (size_t step = 1; step < w; step *= 2)
    for (size_t i = 0; i + step < w; i += 2 * step) {
      float* a = blocks + i * share;
      const float* b = blocks + (i + step) * share;
      for (size_t k = 0; k < share; ++k) a[k] += b[k];
    }
}

// The owned range of the slot's finished bucket, averaged, added into the shard; the
// slot goes back to the pool. Device buffers (offload): the range is copied to the host
// staging on the stream, added at finish; the slot's next zeroing is queued after the copy.
collx_status_t accumulate(collx_zero_t z, size_t si) {
  collx_zero_s::Slot& s = z->s2.slots[si];
  const auto& seg = z->segments[s.bucket];
  const size_t from = seg.buffer_offset - z->layout->buckets[s.bucket].start;
  float* mine = slot_data(s) + from;
  z->s2.slot_of[s.bucket] = -1;
  z->s2.idle.push_back(si);
  if (z->device && s.dev_gathered) {  // deterministic: the same tree of adds, then 1/W, on the stream
    float* blocks = static_cast<float*>(s.dev_gathered->get());
    const size_t w = static_cast<size_t>(z->size);
    for (size_t step = 1; step < w; step *= 2)
      for (size_t i = 0; i + step < w; i += 2 * step) {
        const Status as = device_add(blocks + i * seg.count, blocks + (i + step) * seg.count, seg.count, z->stream);
        if (!as.ok()) return zero_fail(z, as.code(), "summing a deterministic bucket: " + as.message());
      }
    const Status sc = device_scale(blocks, seg.count, static_cast<float>(1.0 / z->size), z->stream);
    if (!sc.ok()) return zero_fail(z, sc.code(), "scaling a deterministic bucket: " + sc.message());
    return zero2_offload_copy(z, blocks, nullptr, seg.shard_offset, seg.count);
  }
  if (z->device) {
    const uint16_t* wire = s.dev_wire ? static_cast<const uint16_t*>(s.dev_wire->get()) + from : nullptr;
    return zero2_offload_copy(z, mine, wire, seg.shard_offset, seg.count);
  }
  if (z->config.deterministic && seg.count) {
    tree_sum(s.gathered.data(), seg.count, static_cast<size_t>(z->size));
    std::copy_n(s.gathered.data(), seg.count, mine);
    scale_in_place(mine, seg.count, static_cast<float>(1.0 / z->size));
  } else if (half_wire(z)) {
    unpack_half(s.wire.data() + from, mine, seg.count, 1.0f, z->config.comm_dtype);
  }
  for (size_t i = 0; i < seg.count; ++i) z->grad[seg.shard_offset + i] += mine[i];
  return COLLX_OK;
}

std::string bucket_name(collx_zero_t z, size_t b) {
  return "bucket " + std::to_string(b) + " of " + std::to_string(z->layout->buckets.size());
}

// The oldest reduction in flight: polled (wait = false: COLLX_IN_PROGRESS while it runs)
// or waited for until the deadline; when it is done, accumulated and its slot freed.
collx_status_t complete_oldest(collx_zero_t z, bool wait, const Deadline& deadline, const char* fn) {
  const size_t si = z->s2.flight.front();
  collx_zero_s::Slot& s = z->s2.slots[si];
  if (s.request) {
    int done = 1;
    collx_status_t st = wait ? collx_wait(s.request, deadline.remaining_ms()) : collx_test(s.request, &done);
    if (st == COLLX_OK && !done) return COLLX_IN_PROGRESS;
    if (st == COLLX_IN_PROGRESS)
      return zero_fail(z, COLLX_ERR_TIMEOUT,
                       std::string(fn) + ": " + bucket_name(z, s.bucket) +
                           " did not complete within the deadline (a rank that never reached it, or a slow "
                           "network); it stays in flight");
    collx_request_free(s.request);
    s.request = nullptr;
    if (st != COLLX_OK)
      return zero_fail(z, st, std::string(fn) + ": " + bucket_name(z, s.bucket) + " failed: " + comm_error(z->comm, st));
  }
  z->s2.flight.pop_front();
  return accumulate(z, si);
}

// A zeroed slot for bucket b (its own when it has one already).
collx_status_t acquire(collx_zero_t z, size_t b, const char* fn) {
  auto& s2 = z->s2;
  if (s2.slot_of[b] >= 0) return COLLX_OK;
  const Deadline deadline = Deadline::after_ms(z->config.timeout_ms);
  while (!s2.flight.empty()) {  // reuse what has finished, without waiting
    collx_status_t st = complete_oldest(z, false, deadline, fn);
    if (st == COLLX_IN_PROGRESS) break;
    if (st != COLLX_OK) return st;
  }
  if (s2.idle.empty() && s2.flight.size() >= kMaxInFlight) {
    collx_status_t st = complete_oldest(z, true, deadline, fn);
    if (st != COLLX_OK) return st;
  }
  if (s2.idle.empty()) {
    collx_zero_s::Slot slot;
    slot.data = z->counted(ZeroMem::kGrads);
    if (z->device) {
      slot.dev.reset(new DeviceMem());
      const Status ds = slot.dev->allocate_zeroed(s2.slot_elems * sizeof(float), z->stream);
      if (!ds.ok()) return zero_fail(z, ds.code(), std::string(fn) + ": allocating a device slot: " + ds.message());
      z->mem.add(ZeroMem::kGrads, s2.slot_elems * sizeof(float));
      if (is_half_type(z->config.grad_dtype)) {
        slot.dev_views.reset(new DeviceMem());
        const Status vs = slot.dev_views->allocate_zeroed(s2.slot_elems * sizeof(uint16_t), z->stream);
        if (!vs.ok()) return zero_fail(z, vs.code(), std::string(fn) + ": allocating a device slot: " + vs.message());
        z->mem.add(ZeroMem::kGrads, s2.slot_elems * sizeof(uint16_t));
      }
      if (z->config.deterministic) {
        slot.dev_gathered.reset(new DeviceMem());
        const Status gs = slot.dev_gathered->allocate_zeroed(s2.slot_elems * sizeof(float), z->stream);
        if (!gs.ok()) return zero_fail(z, gs.code(), std::string(fn) + ": allocating a device slot: " + gs.message());
        z->mem.add(ZeroMem::kGrads, s2.slot_elems * sizeof(float));
      } else if (half_wire(z)) {
        slot.dev_wire.reset(new DeviceMem());
        const Status ws = slot.dev_wire->allocate_zeroed(s2.slot_elems * sizeof(uint16_t), z->stream);
        if (!ws.ok()) return zero_fail(z, ws.code(), std::string(fn) + ": allocating a device slot: " + ws.message());
        z->mem.add(ZeroMem::kComm, s2.slot_elems * sizeof(uint16_t));
      }
    } else {
      slot.data.reserve(s2.slot_elems);
    }
    if (z->config.deterministic) {
      slot.gathered = z->counted(ZeroMem::kGrads);
      slot.gathered.reserve(s2.slot_elems);
    } else if (half_wire(z)) {
      slot.wire = CountedVec<uint16_t>(CountedAlloc<uint16_t>(&z->mem, ZeroMem::kComm));
      slot.wire.reserve(s2.slot_elems);
    }
    s2.slots.push_back(std::move(slot));
    s2.idle.push_back(s2.slots.size() - 1);
  }
  const size_t si = s2.idle.back();
  s2.idle.pop_back();
  collx_zero_s::Slot& s = s2.slots[si];
  s.bucket = b;
  s2.slot_of[b] = static_cast<long>(si);
  if (!s.dev) {
    s.data.assign(z->layout->buckets[b].padded, 0.0f);
    return COLLX_OK;
  }
  Status zs = s.dev_views ? cuda::memset_async(s.dev_views->get(), 0, z->layout->buckets[b].padded * sizeof(uint16_t),
                                               z->stream)
                          : device_zero(slot_data(s), z->layout->buckets[b].padded, z->stream);
  if (!zs.ok()) return zero_fail(z, zs.code(), std::string(fn) + ": zeroing a device slot: " + zs.message());
  return COLLX_OK;
}

// Bucket next_bucket's reduction: pre-divided by W (as the stage 1 reducer) then a
// reduce-scatter, or (deterministic) an all-to-all of the owned ranges, summed by the
// owner later. next_bucket moves on only once it is launched: after a failure (a slot
// not freed by the deadline) the next mark or finish launches it again.
collx_status_t launch_next(collx_zero_t z, const char* fn) {
  const size_t b = z->s2.next_bucket;
  collx_status_t st = acquire(z, b, fn);
  if (st != COLLX_OK) return st;
  const size_t si = static_cast<size_t>(z->s2.slot_of[b]);
  collx_zero_s::Slot& s = z->s2.slots[si];
  const size_t padded = z->layout->buckets[b].padded, share = padded / static_cast<size_t>(z->size);
  if (!padded) {
    z->s2.flight.push_back(si);
    z->s2.next_bucket++;
    return COLLX_OK;
  }
  const auto dt = static_cast<collx_datatype_t>(z->config.comm_dtype);
  if (s.dev) {
    // Queued after the gradients on the stream; the collective is ordered after the scale.
    float* data = slot_data(s);
    const float inv_w = static_cast<float>(1.0 / z->size);
    char* wire = reinterpret_cast<char*>(data);
    Status sc;
    if (s.dev_views) {  // 16-bit views: widened (exactly) into the float32 slot first
      sc = cuda::cast_scale(data, COLLX_FLOAT32, s.dev_views->get(), static_cast<collx_datatype_t>(z->config.grad_dtype),
                            padded, 1.0f, z->stream);
      if (!sc.ok()) return zero_fail(z, sc.code(), std::string(fn) + ": widening " + bucket_name(z, b) + ": " + sc.message());
    }
    const collx_opts_t opts = device_opts(z->stream);
    if (s.dev_gathered) {  // deterministic: owned ranges exchanged, summed by the owner later
      st = collx_ialltoall(data, s.dev_gathered->get(), share, COLLX_FLOAT32, z->comm, &opts, &s.request);
    } else {
      if (s.dev_wire) {  // rounded as pack_half rounds: the pre-scaled float32, to nearest even
        wire = static_cast<char*>(s.dev_wire->get());
        sc = cuda::cast_scale(wire, dt, data, COLLX_FLOAT32, padded, inv_w, z->stream);
      } else {
        sc = device_scale(data, padded, inv_w, z->stream);
      }
      if (!sc.ok())
        return zero_fail(z, sc.code(), std::string(fn) + ": scaling " + bucket_name(z, b) + ": " + sc.message());
      const size_t es = s.dev_wire ? sizeof(uint16_t) : sizeof(float);
      st = collx_ireduce_scatter(wire, wire + static_cast<size_t>(z->rank) * share * es, share, dt, COLLX_SUM, z->comm,
                                 &opts, &s.request);
    }
  } else if (z->config.deterministic) {
    s.gathered.resize(padded);
    st = collx_ialltoall(s.data.data(), s.gathered.data(), share, COLLX_FLOAT32, z->comm, nullptr, &s.request);
  } else if (half_wire(z)) {
    s.wire.resize(padded);
    pack_half(s.data.data(), s.wire.data(), padded, static_cast<float>(1.0 / z->size), dt);
    st = collx_ireduce_scatter(s.wire.data(), s.wire.data() + static_cast<size_t>(z->rank) * share, share, dt,
                               COLLX_SUM, z->comm, nullptr, &s.request);
  } else {
    scale_in_place(s.data.data(), padded, static_cast<float>(1.0 / z->size));
    float* mine = s.data.data() + static_cast<size_t>(z->rank) * share;
    st = collx_ireduce_scatter(s.data.data(), mine, share, dt, COLLX_SUM, z->comm, nullptr, &s.request);
  }
  if (st != COLLX_OK) {
    s.request = nullptr;
    return zero_fail(z, st, std::string(fn) + ": launching " + bucket_name(z, b) + " failed: " + comm_error(z->comm, st));
  }
  z->s2.flight.push_back(si);
  z->s2.next_bucket++;
  return COLLX_OK;
}

// Launches every consecutive complete bucket from next_bucket on.
collx_status_t launch_ready(collx_zero_t z, const char* fn) {
  auto& s2 = z->s2;
  while (s2.next_bucket < s2.pending.size() && s2.pending[s2.next_bucket] == 0) {
    collx_status_t st = launch_next(z, fn);
    if (st != COLLX_OK) return st;
  }
  return COLLX_OK;
}

void reset_step(collx_zero_t z) {
  auto& s2 = z->s2;
  std::fill(s2.marked.begin(), s2.marked.end(), 0);
  for (auto& p : s2.pending) p = 0;
  for (const auto& t : z->layout->tensors) s2.pending[t.bucket]++;
  s2.next_bucket = 0;
  s2.marks = 0;
}

// Every rank learns the lowest rank that missed a mark and its first such tensor: one MIN
// all-reduce of rank << 32 | position (all ones: none missed).
collx_status_t agree_on_marks(collx_zero_t z) {
  uint64_t mine = UINT64_MAX;
  for (size_t pos = 0; pos < z->s2.marked.size() && mine == UINT64_MAX; ++pos)
    if (!z->s2.marked[pos]) mine = (static_cast<uint64_t>(z->rank) << 32) | pos;
  uint64_t first = mine;
  collx_status_t st = collx_allreduce(&mine, &first, 1, COLLX_UINT64, COLLX_MIN, z->comm, nullptr);
  if (st != COLLX_OK)
    return zero_fail(z, st, "collx_zero_finish_grads: the mark check failed: " + comm_error(z->comm, st));
  if (first == UINT64_MAX) return COLLX_OK;
  const uint64_t id = z->layout->tensors[first & 0xffffffffu].id;
  return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                   "collx_zero_finish_grads: rank " + std::to_string(first >> 32) + " never marked tensor " +
                       std::to_string(id) + " ready in this micro-step (call collx_zero_mark_ready for every tensor)");
}

}  // namespace

void zero2_init(collx_zero_t z) {
  auto& s2 = z->s2;
  const size_t nb = z->layout->buckets.size();
  s2.pending.assign(nb, 0);
  s2.slot_of.assign(nb, -1);
  s2.marked.assign(z->layout->tensors.size(), 0);
  for (const auto& b : z->layout->buckets) s2.slot_elems = std::max(s2.slot_elems, b.padded);
  reset_step(z);
}

collx_status_t zero2_grad_ptr(collx_zero_t z, uint64_t id, void** grad) {
  size_t pos = 0;
  collx_status_t st = zero_find(z, id, "collx_zero_grad_ptr", &pos);
  if (st != COLLX_OK) return st;
  if (!grad) return zero_fail(z, COLLX_ERR_INVALID_ARG, "collx_zero_grad_ptr: grad is NULL");
  if (z->s2.marked[pos])
    return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                     "collx_zero_grad_ptr: tensor " + std::to_string(id) +
                         " is already marked ready in this micro-step (stage 2 reduces and reuses its bucket; "
                         "take the view before marking)");
  const auto& t = z->layout->tensors[pos];
  st = acquire(z, t.bucket, "collx_zero_grad_ptr");
  if (st != COLLX_OK) return st;
  collx_zero_s::Slot& s = z->s2.slots[static_cast<size_t>(z->s2.slot_of[t.bucket])];
  const size_t at = t.offset - z->layout->buckets[t.bucket].start;
  if (s.dev_views)
    *grad = static_cast<uint16_t*>(s.dev_views->get()) + at;
  else
    *grad = slot_data(s) + at;
  return COLLX_OK;
}

collx_status_t zero2_mark(collx_zero_t z, uint64_t id) {
  size_t pos = 0;
  collx_status_t st = zero_find(z, id, "collx_zero_mark_ready", &pos);
  if (st != COLLX_OK) return st;
  if (z->s2.marked[pos])
    return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                     "collx_zero_mark_ready: tensor " + std::to_string(id) +
                         " was marked ready twice in this micro-step (accumulate into the view and mark once)");
  z->s2.marked[pos] = 1;
  z->s2.marks++;
  z->s2.pending[z->layout->tensors[pos].bucket]--;
  return launch_ready(z, "collx_zero_mark_ready");
}

// Launches what is left even when marks are missing, so the peers' collectives complete.
collx_status_t zero2_finish(collx_zero_t z, int64_t timeout_ms) {
  const char* fn = "collx_zero_finish_grads";
  auto& s2 = z->s2;
  collx_status_t st = COLLX_OK;
  while (st == COLLX_OK && s2.next_bucket < s2.pending.size()) st = launch_next(z, fn);
  const Deadline deadline = Deadline::after_ms(timeout_ms < 0 ? z->config.timeout_ms : timeout_ms);
  while (st == COLLX_OK && !s2.flight.empty()) st = complete_oldest(z, true, deadline, fn);
  if (st == COLLX_OK && z->device && !z->device_state) st = zero_offload_add(z, fn);
  if (st != COLLX_OK) return st;
  st = agree_on_marks(z);
  reset_step(z);
  return st;
}

void zero2_drain(collx_zero_t z) {
  for (size_t si : z->s2.flight) {
    collx_request_t& r = z->s2.slots[si].request;
    if (!r) continue;
    collx_wait(r, -1);  // the reduction writes into the slot: it must end before the slot goes
    collx_request_free(r);
    r = nullptr;
  }
}

}  // namespace parallel
}  // namespace collx
