// ZeRO stage 3 prefetch plan (DeepSpeed's parameter trace): the fetch order of one step is
// recorded; later steps follow it and, at each fetch, launch the gathers of the next
// prefetch_depth tensors, so they travel while the engine computes with the current ones.
// Every decision depends only on the fetch/release sequence, identical on every rank, so
// the ranks issue the same all-gathers in the same order.
#include <algorithm>

#include "parallel/zero_internal.h"

namespace collx {
namespace parallel {
namespace {

constexpr int32_t kOff = 0, kRecording = 1, kInUse = 2;

size_t padded(collx_zero_t z, uint64_t id) { return z->layout->tensors[z->layout->index.at(id)].padded; }

void record_again(collx_zero_t z, const std::vector<uint64_t>& first) {
  auto& p = z->plan;
  p.stats.rerecords++;
  p.stats.state = kRecording;
  p.order = first;
  p.stats.length = p.order.size();
  p.cursor = 0;
}

// Would `more` elements of prefetch pass prefetch_bytes or max_live_elems?
bool prefetch_fits(collx_zero_t z, size_t more) {
  const size_t bytes = z->config.prefetch_bytes;
  if (bytes && (z->plan.speculative_elems + more) * sizeof(float) > bytes) return false;
  return !zero3_over_limit(z, more);
}

}  // namespace

void zero3_plan_on_fetch(collx_zero_t z, const std::vector<uint64_t>& ids) {
  auto& p = z->plan;
  if (p.stats.state == kOff) return;
  const bool in_use = p.stats.state == kInUse;
  for (uint64_t id : ids) {
    if (p.speculative.count(id)) {
      p.stats.hits++;
      p.speculative.erase(id);  // the engine's now: release drops it, not the plan
      p.speculative_elems -= padded(z, id);
    } else if (in_use && !z->gathered.count(id) && !zero3_in_flight(z, id)) {
      p.stats.misses++;
    }
  }
  if (!in_use) {
    p.order.insert(p.order.end(), ids.begin(), ids.end());
    p.stats.length = p.order.size();
    return;
  }
  const bool follows = p.cursor + ids.size() <= p.order.size() &&
                       std::equal(ids.begin(), ids.end(), p.order.begin() + static_cast<long>(p.cursor));
  if (follows) {
    p.cursor += ids.size();
    return;
  }
  // This step becomes the new recording: the part that followed the order, then this fetch.
  std::vector<uint64_t> step(p.order.begin(), p.order.begin() + static_cast<long>(p.cursor));
  step.insert(step.end(), ids.begin(), ids.end());
  record_again(z, step);
}

// The next prefetch_depth distinct tensors of the order after the cursor; those not
// gathered yet go into one all-gather, in order, up to the first that does not fit (it
// waits for a later fetch, after releases made room: nothing ever blocks on memory).
collx_status_t zero3_plan_prefetch(collx_zero_t z) {
  auto& p = z->plan;
  if (p.stats.state != kInUse) return COLLX_OK;
  std::vector<uint64_t> seen, pick;
  size_t elems = 0;
  for (size_t i = p.cursor; i < p.order.size(); ++i) {
    if (seen.size() >= static_cast<size_t>(z->config.prefetch_depth)) break;
    const uint64_t id = p.order[i];
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    if (z->gathered.count(id) || zero3_in_flight(z, id)) continue;
    if (!prefetch_fits(z, elems + padded(z, id))) {
      p.stats.deferred++;
      break;
    }
    pick.push_back(id);
    elems += padded(z, id);
  }
  if (pick.empty()) return COLLX_OK;
  std::sort(pick.begin(), pick.end());
  collx_status_t st = zero3_launch(z, pick, elems);
  if (st != COLLX_OK) return st;
  p.speculative.insert(pick.begin(), pick.end());
  p.speculative_elems += elems;
  p.stats.prefetched += pick.size();
  return COLLX_OK;
}

collx_status_t zero3_plan_evict(collx_zero_t z, const std::vector<uint64_t>& keep) {
  std::vector<uint64_t> drop;
  for (uint64_t id : z->plan.speculative)
    if (!std::binary_search(keep.begin(), keep.end(), id)) drop.push_back(id);
  if (drop.empty()) return COLLX_OK;
  collx_status_t st = zero3_complete_ids(z, drop);  // a gather in flight is waited for, then dropped
  if (st != COLLX_OK) return st;
  for (uint64_t id : drop) zero3_drop(z, id);
  z->plan.stats.evicted += drop.size();
  return COLLX_OK;
}

collx_status_t zero3_plan_step_end(collx_zero_t z) {
  auto& p = z->plan;
  collx_status_t st = zero3_plan_evict(z, {});
  if (st != COLLX_OK || p.stats.state == kOff) return st;
  if (p.stats.state == kRecording) {
    if (!p.order.empty()) p.stats.state = kInUse;  // a step without fetches records on
  } else if (p.cursor != p.order.size()) {
    record_again(z, {});  // the step ended before the order did
  }
  p.cursor = 0;
  p.stats.length = p.order.size();
  return COLLX_OK;
}

}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_zero3_plan_stats(collx_zero_t z, collx_zero3_plan_stats_t* stats) {
  if (!z || !stats) return collx::parallel::refuse_arg(z, "collx_zero3_plan_stats", "z or stats is NULL");
  if (stats->size < sizeof(collx_zero3_plan_stats_t))
    return zero_fail(z, COLLX_ERR_INVALID_ARG,
                     "collx_zero3_plan_stats: stats->size is " + std::to_string(stats->size) + ", expected " +
                         std::to_string(sizeof(collx_zero3_plan_stats_t)));
  const size_t size = stats->size;
  *stats = z->plan.stats;
  stats->size = size;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_zero3_plan_record(collx_zero_t z) {
  return zero_call(z, "collx_zero3_plan_record", [&]() -> collx_status_t {
    if (z->config.stage != 3 || z->plan.stats.state == kOff)
      return zero_fail(z, COLLX_ERR_INVALID_USAGE,
                       "collx_zero3_plan_record: needs stage 3 with config.prefetch_depth > 0 (stage " +
                           std::to_string(z->config.stage) + ", prefetch_depth " +
                           std::to_string(z->config.prefetch_depth) + ")");
    collx_status_t st = zero3_plan_evict(z, {});
    if (st != COLLX_OK) return st;
    z->plan.stats.state = kRecording;
    z->plan.order.clear();
    z->plan.cursor = 0;
    z->plan.stats.length = 0;
    return COLLX_OK;
  });
}

}  // extern "C"
