// Internals of ZeRO (collx_zero_*): the owned segments of the layout, the shard buffers,
// the stage 1/2 reducer and the stage 3 gathered copies.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "parallel/dp_internal.h"

struct collx_zero_s {
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
    std::vector<float> send;
    std::vector<float> recv;
    collx_request_t request = nullptr;
  };
  collx_comm_t comm = nullptr;
  int32_t rank = 0;
  int32_t size = 1;
  collx_layout_t layout = nullptr;
  collx_zero_config_t config{};
  std::vector<Segment> segments;
  std::vector<size_t> tensor_segment;  // per layout tensor (registration order)
  size_t shard_count = 0;
  std::vector<float> master, grad, exp_avg, exp_avg_sq;
  int64_t steps = 0;
  // Stages 1 and 2.
  std::vector<float> params;  // full parameters, in buffer space
  collx_dp_t dp = nullptr;    // reduce-scatter of the full gradient buffer
  bool boundary = true;
  // Stage 3.
  std::map<uint64_t, std::vector<float>> gathered;  // id -> padded full tensor
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
// True when gathering `elems` more would pass max_live_elems.
bool zero3_over_limit(collx_zero_t z, size_t elems);
// Stage-3 gather of the sorted ids outside the plan (publish's persistent tensors).
collx_status_t zero3_fetch_unplanned(collx_zero_t z, const uint64_t* ids, size_t n);
// Drops a gathered full copy and its live elements.
void zero3_drop(collx_zero_t z, uint64_t id);

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
