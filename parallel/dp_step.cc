// Data-parallel reducer, per micro-step: marks, in-order bucket launches, finish.
#include "lib/common/deadline.h"
#include "lib/cuda/device.h"
#include "parallel/dp_internal.h"
#include "parallel/low_precision.h"

namespace collx {
namespace parallel {

namespace {

// Bucket b is complete and every earlier one launched: 16-bit wire types hand it to the
// helper thread, float32 launches it here (scaling in place is cheap).
collx_status_t launch(collx_dp_t dp, size_t b) {
  dp->buckets[b].launched = true;
  if (dp->helper) {
    dp->helper->launch(b);
    return COLLX_OK;
  }
  std::string why;
  collx_status_t st = dp_start_bucket(dp, b, &why);
  if (st != COLLX_OK) return dp_fail(dp, st, "collx_dp: " + why);
  return COLLX_OK;
}

// Launches every consecutive complete bucket from next_bucket on (DDP's in-order rule).
collx_status_t launch_ready(collx_dp_t dp) {
  while (dp->next_bucket < dp->buckets.size() && dp->buckets[dp->next_bucket].pending == 0) {
    collx_status_t st = launch(dp, dp->next_bucket++);
    if (st != COLLX_OK) return st;
  }
  return COLLX_OK;
}

collx_status_t mark(collx_dp_t dp, uint64_t id, const char* fn) {
  auto it = dp->layout->index.find(id);
  if (it == dp->layout->index.end())
    return dp_fail(dp, COLLX_ERR_INVALID_ARG,
                   std::string(fn) + ": tensor " + std::to_string(id) + " is not in the layout");
  const size_t pos = it->second;
  if (dp->marked[pos])
    return dp_fail(dp, COLLX_ERR_INVALID_USAGE,
                   std::string(fn) + ": tensor " + std::to_string(id) +
                       " was marked ready twice in this micro-step (a gradient produced twice, "
                       "e.g. by re-entrant checkpointing or a parameter used twice; accumulate "
                       "into the view and mark once)");
  dp->marked[pos] = 1;
  dp->marks++;
  dp->buckets[dp->layout->tensors[pos].bucket].pending--;
  if (!dp->sync) return COLLX_OK;
  return launch_ready(dp);
}

// Position (registration order) of the first tensor never marked, or -1.
long first_unmarked(collx_dp_t dp) {
  for (size_t i = 0; i < dp->marked.size(); ++i)
    if (!dp->marked[i]) return static_cast<long>(i);
  return -1;
}

std::string never_marked_message(uint64_t id, int32_t rank) {
  return "collx_dp_finish: rank " + std::to_string(rank) + " never marked tensor " + std::to_string(id) +
         " ready in this micro-step (call collx_dp_mark_ready or collx_dp_mark_unused for every "
         "tensor, or set config.allow_unused = 1)";
}

void reset_step(collx_dp_t dp) {
  std::fill(dp->marked.begin(), dp->marked.end(), 0);
  for (auto& b : dp->buckets) {
    b.pending = b.num_tensors;
    b.launched = false;
  }
  dp->next_bucket = 0;
  dp->marks = 0;
}

// Every rank learns the first rank (and its tensor) that missed a mark: an allgather of
// (flag, tensor id) pairs, so the whole group fails the step with one message.
collx_status_t agree_on_marks(collx_dp_t dp, long missing) {
  std::vector<uint64_t> mine = {missing >= 0 ? 1u : 0u,
                                missing >= 0 ? dp->layout->tensors[static_cast<size_t>(missing)].id : 0};
  std::vector<uint64_t> all(2 * static_cast<size_t>(dp->size));
  collx_status_t st = collx_allgather(mine.data(), all.data(), 2, COLLX_UINT64, dp->comm, nullptr);
  if (st != COLLX_OK)
    return dp_fail(dp, st, "collx_dp_finish: the mark check failed: " + comm_error(dp->comm, st));
  for (int32_t r = 0; r < dp->size; ++r)
    if (all[2 * static_cast<size_t>(r)])
      return dp_fail(dp, COLLX_ERR_INVALID_USAGE, never_marked_message(all[2 * static_cast<size_t>(r) + 1], r));
  return COLLX_OK;
}

std::string timeout_message(collx_dp_t dp, size_t b) {
  return "collx_dp_finish: bucket " + std::to_string(b) + " of " + std::to_string(dp->buckets.size()) +
         " did not complete within the deadline (a rank that never reached it, or a slow network); it stays in "
         "flight";
}

// The helper launched, waited for and wrote back the buckets; wait until it is idle.
collx_status_t wait_helper(collx_dp_t dp, const Deadline& deadline) {
  size_t b = 0;
  std::string why;
  const collx_status_t st = dp->helper->wait_idle(deadline, &b, &why);
  if (st == COLLX_IN_PROGRESS) return dp_fail(dp, COLLX_ERR_TIMEOUT, timeout_message(dp, b));
  if (st != COLLX_OK) return dp_fail(dp, st, "collx_dp_finish: " + why);
  return COLLX_OK;
}

collx_status_t wait_buckets(collx_dp_t dp, const Deadline& deadline) {
  collx_status_t st = COLLX_OK;
  for (size_t b = 0; b < dp->buckets.size(); ++b) {
    collx_dp_s::Bucket& bk = dp->buckets[b];
    if (!bk.request) continue;
    st = collx_wait(bk.request, deadline.remaining_ms());
    if (st == COLLX_IN_PROGRESS) return dp_fail(dp, COLLX_ERR_TIMEOUT, timeout_message(dp, b));
    collx_request_free(bk.request);
    bk.request = nullptr;
    if (st != COLLX_OK)
      return dp_fail(dp, st, "collx_dp_finish: bucket " + std::to_string(b) + " failed: " +
                                 comm_error(dp->comm, st));
    std::string why;
    st = dp_complete_bucket(dp, bk, &why);
    if (st != COLLX_OK) return dp_fail(dp, st, "collx_dp_finish: bucket " + std::to_string(b) + ": " + why);
  }
  return COLLX_OK;
}

collx_status_t finish(collx_dp_t dp, int64_t timeout_ms) {
  const long missing = dp->config.allow_unused ? -1 : first_unmarked(dp);
  if (!dp->sync) {
    // no_sync with 16-bit views: this micro-step's gradients go into the float32 buffer now.
    for (size_t b = 0; b < dp->buckets.size(); ++b) {
      std::string why;
      const collx_status_t st = dp_fold_views(dp, b, &why);
      if (st != COLLX_OK) return dp_fail(dp, st, "collx_dp_finish: " + why);
    }
    reset_step(dp);
    if (missing >= 0)
      return dp_fail(dp, COLLX_ERR_INVALID_USAGE,
                     never_marked_message(dp->layout->tensors[static_cast<size_t>(missing)].id, dp->rank));
    return COLLX_OK;
  }
  // Launch what is left even when marks are missing, so the peers' collectives complete.
  collx_status_t st = COLLX_OK;
  while (st == COLLX_OK && dp->next_bucket < dp->buckets.size()) st = launch(dp, dp->next_bucket++);
  if (st != COLLX_OK) return st;
  const Deadline deadline = Deadline::after_ms(timeout_ms < 0 ? dp->config.timeout_ms : timeout_ms);
  st = dp->helper ? wait_helper(dp, deadline) : wait_buckets(dp, deadline);
  if (st != COLLX_OK) return st;
  reset_step(dp);
  if (dp->config.check_marks && !dp->config.allow_unused) return agree_on_marks(dp, missing);
  if (missing >= 0)
    return dp_fail(dp, COLLX_ERR_INVALID_USAGE,
                   never_marked_message(dp->layout->tensors[static_cast<size_t>(missing)].id, dp->rank));
  return COLLX_OK;
}

bool in_flight(collx_dp_t dp) {
  if (dp->helper) return dp->helper->busy();
  for (const auto& b : dp->buckets)
    if (b.request) return true;
  return false;
}

template <typename Fn>
collx_status_t dp_call(collx_dp_t dp, const char* fn, Fn&& body) {
  if (!dp) return collx::parallel::refuse_arg(nullptr, fn, "dp is NULL");
  return guarded(body, [&](const std::string& m) { dp_fail(dp, COLLX_OK, std::string(fn) + ": " + m); });
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_dp_mark_ready(collx_dp_t dp, uint64_t tensor_id) {
  return dp_call(dp, "collx_dp_mark_ready", [&] { return mark(dp, tensor_id, "collx_dp_mark_ready"); });
}

COLLX_API collx_status_t collx_dp_mark_unused(collx_dp_t dp, uint64_t tensor_id) {
  return dp_call(dp, "collx_dp_mark_unused", [&] { return mark(dp, tensor_id, "collx_dp_mark_unused"); });
}

COLLX_API collx_status_t collx_dp_finish(collx_dp_t dp, int64_t timeout_ms) {
  return dp_call(dp, "collx_dp_finish", [&] { return finish(dp, timeout_ms); });
}

COLLX_API collx_status_t collx_dp_set_sync(collx_dp_t dp, int32_t enabled) {
  if (!dp) return collx::parallel::refuse_arg(dp, "collx_dp_set_sync", "dp is NULL");
  if (enabled != 0 && enabled != 1)
    return dp_fail(dp, COLLX_ERR_INVALID_ARG, "collx_dp_set_sync: enabled must be 0 or 1");
  if (dp->marks)
    return dp_fail(dp, COLLX_ERR_INVALID_USAGE,
                   "collx_dp_set_sync: called inside a micro-step (after a mark, before "
                   "collx_dp_finish); switch sync between micro-steps");
  dp->sync = enabled == 1;
  return COLLX_OK;
}

COLLX_API collx_status_t collx_dp_zero(collx_dp_t dp) {
  if (!dp) return collx::parallel::refuse_arg(nullptr, "collx_dp_zero", "dp is NULL");
  if (in_flight(dp) || dp->marks)
    return dp_fail(dp, COLLX_ERR_INVALID_USAGE,
                   "collx_dp_zero: a micro-step is open or a bucket is in flight; call "
                   "collx_dp_finish first");
  if (!dp->device) {
    std::fill(dp->buffer, dp->buffer + dp->total, 0.0f);
    return COLLX_OK;
  }
  collx::Status st = device_zero(dp->buffer, dp->total, dp->stream);  // queued on the stream
  if (st.ok() && dp->device_views.get())
    st = collx::cuda::memset_async(dp->device_views.get(), 0, dp->total * sizeof(uint16_t), dp->stream);
  if (!st.ok()) return dp_fail(dp, st.code(), "collx_dp_zero: " + st.message());
  return COLLX_OK;
}

}  // extern "C"
