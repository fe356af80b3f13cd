// Internals of ZeRO (collx_zero_*): the owned segments of the layout, the shard buffers,
// the stage 0/1 reducer, the stage 2 bucket slots and the stage 3 gathered copies. Every
// element buffer is allocated on the handle's memory account (zero_memory.h).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "parallel/device_mem.h"
#include "parallel/dp_internal.h"
#include "parallel/zero_memory.h"

struct collx_zero_s {
  using Mem = collx::parallel::ZeroMem;
  using Floats = collx::parallel::CountedVec<float>;
  // Declared first: the buffers below return their bytes to it when they go.
  collx::parallel::ZeroMemAccount mem;
  Floats counted(Mem category) { return Floats(collx::parallel::CountedAlloc<float>(&mem, category)); }
  // One contiguous owned range of the buffer space and where it sits in the shard: an
  // owner range per bucket (FLAT) or chunk `rank` of a padded tensor (PER_TENSOR).
  struct Segment {
    size_t buffer_offset = 0;
    size_t shard_offset = 0;
    size_t count = 0;
  };
  // A coalesced stage-3 all-gather in flight: the ids (sorted), rank-major chunks.
  struct Gather {
    std::vector<uint64_t> ids;
    Floats send;
    Floats recv;
    collx_request_t request = nullptr;
    // Device buffers: send and receive on the device (send filled from the master on the
    // stream; offload: through `up`, pinned). Freed after the stream drained.
    std::unique_ptr<collx::parallel::DeviceMem> dsend, drecv;
    std::unique_ptr<collx::parallel::PinnedMem> up;
    size_t elems = 0;         // chunk elements of this rank (send size)
    size_t device_bytes = 0;  // booked under comm while in flight
  };
  // A gathered stage-3 tensor (padded): host vector, or device memory with device buffers.
  struct Gathered {
    Floats host;
    std::unique_ptr<collx::parallel::DeviceMem> dev;
    size_t elems = 0;
    float* data() { return dev ? static_cast<float*>(dev->get()) : host.data(); }
    size_t size() const { return dev ? elems : host.size(); }
  };
  collx_comm_t comm = nullptr;
  int32_t rank = 0;
  int32_t size = 1;
  collx_layout_t layout = nullptr;
  collx_zero_config_t config{};
  std::vector<Segment> segments;
  std::vector<size_t> tensor_segment;  // per layout tensor (registration order)
  size_t shard_count = 0;
  Floats master = counted(Mem::kOptim);
  Floats grad = counted(Mem::kGrads);
  Floats exp_avg = counted(Mem::kOptim);
  Floats exp_avg_sq = counted(Mem::kOptim);
  int64_t steps = 0;
  // Stages 0, 1 and 2.
  Floats params = counted(Mem::kParams);  // full parameters, in buffer space
  // Stages 0 and 1: the full bucketed gradient buffer and its reducer (all-reduce for
  // stage 0, reduce-scatter for stage 1).
  Floats grad_buffer = counted(Mem::kGrads);
  collx_dp_t dp = nullptr;
  bool boundary = true;
  // Device buffers (zero_device.cc; config.mem_kind COLLX_MEM_CUDA): the parameter view and
  // the bucketed gradient buffer live on the device, every device operation is ordered on
  // `stream`; with offload the shards above stay on the host and `staging` (pinned) carries the
  // reduced owned ranges down and the updated shard up.
  bool device = false;
  void* stream = nullptr;
  collx::parallel::DeviceMem params_dev;
  collx::parallel::DeviceMem grad_buffer_dev;
  collx::parallel::PinnedMem staging;  // shard_count floats (offload)
  // Device buffers without offload: the master shard, gradient shard and moments on the
  // device (the host vectors above stay empty), stepped by lib/cuda's optimizer kernels.
  bool device_state = false;
  collx::parallel::DeviceMem master_dev, grad_dev, exp_avg_dev, exp_avg_sq_dev;
  Floats mirror = counted(Mem::kComm);  // checkpoint calls: a host copy of one state kind
  // Stage 2 (zero2_grads.cc): each bucket gets a slot from a pool while it is filled and
  // reduced; the owned range is then added into `grad` and the slot reused.
  struct Slot {
    size_t bucket = 0;
    Floats data;                                    // the bucket's gradients (padded)
    collx::parallel::CountedVec<uint16_t> wire;     // 16-bit wire copy
    Floats gathered;                                // deterministic: every rank's owned range
    collx_request_t request = nullptr;
    // Device buffers: the slot on the device instead of `data` (zeroed on the stream).
    std::unique_ptr<collx::parallel::DeviceMem> dev;
    std::unique_ptr<collx::parallel::DeviceMem> dev_wire;   // 16-bit comm_dtype
    std::unique_ptr<collx::parallel::DeviceMem> dev_views;  // 16-bit grad_dtype: the views
    std::unique_ptr<collx::parallel::DeviceMem> dev_gathered;  // deterministic: W owned ranges
  };
  struct Stage2 {
    std::vector<size_t> pending;  // per bucket: tensors not marked in this micro-step
    std::vector<char> marked;     // per tensor (registration order)
    std::vector<long> slot_of;    // per bucket: its slot, or -1
    std::vector<Slot> slots;      // the pool (every slot ever made)
    std::vector<size_t> idle;     // slots free for the next bucket
    std::deque<size_t> flight;    // slots launched, in launch order
    size_t next_bucket = 0;       // buckets launch strictly in index order
    size_t marks = 0;
    size_t slot_elems = 0;        // the largest padded bucket
  } s2;
  // Stage 3.
  std::map<uint64_t, Gathered> gathered;  // id -> padded full tensor
  std::vector<Gather> in_flight;
  size_t live = 0;
  size_t peak = 0;
  // Stage 3 prefetch plan (zero3_plan.cc): the recorded fetch order, the position of the
  // next expected fetch, and the tensors gathered by the plan that no fetch asked for yet.
  struct Plan {
    std::vector<uint64_t> order;
    size_t cursor = 0;
    std::set<uint64_t> speculative;
    size_t speculative_elems = 0;
    collx_zero3_plan_stats_t stats{};
  } plan;
  collx::parallel::ErrorSlot error;
};

namespace collx {
namespace parallel {

collx_status_t zero_fail(collx_zero_t z, collx_status_t st, const std::string& msg);
// Position of the tensor in the layout, or an INVALID_ARG naming it (fn: the caller).
collx_status_t zero_find(collx_zero_t z, uint64_t id, const char* fn, size_t* pos);
// The part of tensor `pos` this rank keeps: elements [*own_off, +*n) at buffer offset
// *boff (stage 0: the whole tensor; otherwise the layout's owner range).
void zero_owned(collx_zero_t z, size_t pos, size_t* own_off, size_t* boff, size_t* n);
// Shard offset of buffer offset `boff` inside the segment of tensor `pos`.
size_t zero_shard_offset(collx_zero_t z, size_t pos, size_t boff);
// Elements of one stage-3 chunk of tensor `pos` (padded numel / dp).
size_t zero_chunk(collx_zero_t z, size_t pos);
bool zero_persistent(collx_zero_t z, size_t pos);
// Waits for every stage-3 gather in flight and unpacks it.
collx_status_t zero3_complete_all(collx_zero_t z);
// Waits, in launch order, until no gather in flight holds one of the sorted `ids`.
collx_status_t zero3_complete_ids(collx_zero_t z, const std::vector<uint64_t>& ids);
// True when a stage-3 gather in flight holds the tensor.
bool zero3_in_flight(collx_zero_t z, uint64_t id);
// Launches one all-gather of the sorted, not yet gathered `ids` (elems: their padded sum).
collx_status_t zero3_launch(collx_zero_t z, std::vector<uint64_t> ids, size_t elems);
// The same on device buffers (send filled on the stream from the master shard).
collx_status_t zero3_launch_device(collx_zero_t z, collx_zero_s::Gather g, size_t elems);
// True when gathering `elems` more would pass max_live_elems.
bool zero3_over_limit(collx_zero_t z, size_t elems);
// Stage-3 gather of the sorted ids outside the plan (publish's persistent tensors).
collx_status_t zero3_fetch_unplanned(collx_zero_t z, const uint64_t* ids, size_t n);
// Drops a gathered full copy and its live elements.
void zero3_drop(collx_zero_t z, uint64_t id);

// Device buffers (zero_device.cc). What a valid config cannot do on device buffers yet
// (COLLX_ERR_UNSUPPORTED), else "".
std::string zero_device_unsupported(const collx_zero_config_t& c);
// Allocates the device parameter view and gradient buffer (zeroed on the stream).
collx_status_t zero_device_init(collx_zero_t z);
// The full parameter view (stages 0-2): device or host memory, elements of
// zero_param_size(z) bytes (config.param_dtype).
char* zero_params(collx_zero_t z);
size_t zero_param_size(collx_zero_t z);
// Device state: collx_zero_load (initial weights or master pieces): the owned part into the
// device master shard and the whole range into the parameter view; waits for the copies.
collx_status_t zero_device_load_master(collx_zero_t z, uint64_t id, size_t toff, size_t count, const float* values,
                                       const char* fn);
// Stage 3 on device buffers: the device full gradient of tensor `pos` pre-divided,
// reduce-scattered on the stream and added into the gradient shard.
collx_status_t zero3_device_reduce_grad(collx_zero_t z, size_t pos, const void* full);
// Device state and checkpoints: the device shard of a state kind (NULL when not kept or no
// such kind); the shard downloaded into z->mirror (waits); `count` mirror elements from
// shard_offset uploaded back (waits).
float* zero_device_state(collx_zero_t z, int32_t kind);
collx_status_t zero_device_download(collx_zero_t z, int32_t kind, const char* fn, collx_zero_s::Floats** out);
collx_status_t zero_device_upload(collx_zero_t z, int32_t kind, size_t shard_offset, size_t count, const char* fn);
// Shard pointers (device memory when device_state).
float* zero_master(collx_zero_t z);
float* zero_grad_shard(collx_zero_t z);
// Device state: the optimizer step on the device (zero_step.cc's formulas, lib/cuda kernels).
collx_status_t zero_device_step(collx_zero_t z, float grad_scale);
// Device state: the sum of squares of `count` shard gradients from shard_offset, added to
// the device double `acc` (zero it first); the caller reads it after waiting.
collx_status_t zero_device_norm(collx_zero_t z, const std::vector<std::pair<size_t, size_t>>& ranges, double* out);
// Device state (stages 0, 1): adds the reduced owned ranges of `buffer` into the device
// gradient shard, on the stream.
collx_status_t zero_device_add_grads(collx_zero_t z, const float* buffer);
// Offload: copies the reduced owned ranges of the device gradient buffer to the host
// (waiting for the stream) and adds them into the gradient shard.
collx_status_t zero_offload_grads(collx_zero_t z, const float* buffer);
// Offload: queues the copy of the master shard into the owned ranges of the device
// parameter view (through `staging`, so the host may change the master at once).
collx_status_t zero_device_publish_copy(collx_zero_t z);
// Stage 2 offload: queues the copy of the finished slot's owned range (reduced, averaged)
// into `staging` at its shard offset; zero_offload_add adds the whole staging into the
// gradient shard once the stream is waited for (finish_grads).
// `wire`: the owned range on a 16-bit wire (widened into `owned` first), or NULL.
collx_status_t zero2_offload_copy(collx_zero_t z, float* owned, const uint16_t* wire, size_t shard_offset,
                                  size_t count);
collx_status_t zero_offload_add(collx_zero_t z, const char* fn);
// Writes count host floats into the device parameter view at element `offset` (rounded to
// param_dtype) and waits for the copy (the caller's values may go when the call returns).
collx_status_t zero_device_load_params(collx_zero_t z, size_t offset, const float* values, size_t count);

// Stage 2 (zero2_grads.cc): sizes the per-bucket state; the gradient view of a tensor in
// its bucket's slot; marks; end of the micro-step; waits for what is in flight (destroy).
void zero2_init(collx_zero_t z);
collx_status_t zero2_grad_ptr(collx_zero_t z, uint64_t id, void** grad);
collx_status_t zero2_mark(collx_zero_t z, uint64_t id);
collx_status_t zero2_finish(collx_zero_t z, int64_t timeout_ms);
void zero2_drain(collx_zero_t z);

// The plan (zero3_plan.cc). A fetch of the sorted `ids`: hits and misses, then the order
// is followed, or recorded, or dropped and recorded again.
void zero3_plan_on_fetch(collx_zero_t z, const std::vector<uint64_t>& ids);
// After the fetch launched its own gather: the prefetch of the next tensors of the order.
collx_status_t zero3_plan_prefetch(collx_zero_t z);
// Drops the plan prefetches not in `keep` (sorted) that no fetch asked for.
collx_status_t zero3_plan_evict(collx_zero_t z, const std::vector<uint64_t>& keep);
// Publish ended a step: unused prefetches dropped, the recording becomes the plan.
collx_status_t zero3_plan_step_end(collx_zero_t z);

template <typename Fn>
collx_status_t zero_call(collx_zero_t z, const char* fn, Fn&& body) {
  if (!z) return COLLX_ERR_INVALID_ARG;
  return guarded(body, [&](const std::string& m) { zero_fail(z, COLLX_OK, std::string(fn) + ": " + m); });
}

}  // namespace parallel
}  // namespace collx
