// Pipeline parallelism: the batched neighbour exchange (all transfers posted before any
// wait, so neighbours cannot wait on each other), on a line of stages or on a ring (the
// interleaved schedule), and the non-interleaved 1F1B schedule. Device buffers: the
// transfers are ordered on the thread's current parallel stream (parallel_device.h).
#include <algorithm>
#include <vector>

#include "lib/common/deadline.h"
#include "parallel/device_buffers.h"
#include "parallel/free_calls.h"

namespace collx {
namespace parallel {
namespace {

struct Transfer {
  const char* what;
  collx_request_t request = nullptr;
};

// ring: stage size-1's next is stage 0 (the interleaved schedule); activations and
// gradients then use tags 2*tag and 2*tag+1. Otherwise the ends have no neighbour there.
collx_status_t exchange(const char* fn, bool ring, collx_comm_t comm, const void* send_next, void* recv_prev,
                        const void* send_prev, void* recv_next, size_t count, collx_datatype_t dt, int32_t tag,
                        int64_t timeout_ms) {
  if (!comm) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": pp_comm is NULL");
  GroupShape g;
  collx_status_t st = group_shape(comm, fn, &g);
  if (st != COLLX_OK) return st;
  if (tag < 0 || (ring && tag >= (1 << 30)))
    return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": tag " + std::to_string(tag) + " must be >= 0" +
                                                (ring ? " and < 2^30" : ""));
  const bool first = g.rank == 0, last = g.rank + 1 == g.size;
  if (ring && g.size < 2)
    return free_fail(COLLX_ERR_INVALID_ARG,
                     std::string(fn) + ": pp_comm has 1 rank; a pipeline ring needs at least 2 stages");
  if (!ring && ((first && (recv_prev || send_prev)) || (last && (send_next || recv_next))))
    return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": stage " + std::to_string(g.rank) + " of " +
                                                std::to_string(g.size) +
                                                " has no " + (first && (recv_prev || send_prev) ? "previous" : "next") +
                                                " stage; pass NULL for that transfer");
  const int32_t size = static_cast<int32_t>(g.size), rank = static_cast<int32_t>(g.rank);
  const int32_t next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const int32_t fwd_tag = ring ? 2 * tag : tag, bwd_tag = ring ? 2 * tag + 1 : tag;
  std::vector<Transfer> posted;
  const collx_opts_t opts = stream_opts();  // device buffers: ordered on the current stream
  // Receives first, then sends; every transfer is posted before the first wait.
  auto post = [&](const char* what, bool is_send, const void* sbuf, void* rbuf, int32_t peer, int32_t t_tag) {
    if (st != COLLX_OK) return;
    Transfer t{what, nullptr};
    collx_status_t s = is_send ? collx_isend(sbuf, count, dt, peer, t_tag, comm, &opts, &t.request)
                               : collx_irecv(rbuf, count, dt, peer, t_tag, comm, &opts, &t.request);
    if (s == COLLX_OK)
      posted.push_back(t);
    else
      st = comm_fail(comm, s, fn);
  };
  if (recv_prev) post("receive from the previous stage", false, nullptr, recv_prev, prev, fwd_tag);
  if (recv_next) post("receive from the next stage", false, nullptr, recv_next, next, bwd_tag);
  if (send_next) post("send to the next stage", true, send_next, nullptr, next, fwd_tag);
  if (send_prev) post("send to the previous stage", true, send_prev, nullptr, prev, bwd_tag);
  const Deadline deadline = Deadline::after_ms(timeout_ms);
  for (Transfer& t : posted) {
    collx_status_t s = collx_wait(t.request, timeout_ms < 0 ? -1 : deadline.remaining_ms());
    if (s == COLLX_IN_PROGRESS) {
      if (st == COLLX_OK)
        st = free_fail(COLLX_ERR_TIMEOUT, std::string(fn) + ": the " + t.what + " of stage " +
                                              std::to_string(g.rank) + " did not finish within " +
                                              std::to_string(timeout_ms) + " ms");
    } else if (st == COLLX_OK && s != COLLX_OK) {
      st = comm_fail(comm, s, fn);
    }
    // Also when still running: the transfer goes on without its handle (the communicator
    // keeps it until it ends), and nothing is left holding the communicator.
    collx_request_free(t.request);
  }
  return st;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

using namespace collx::parallel;

extern "C" {

COLLX_API collx_status_t collx_pp_exchange(const void* send_next, void* recv_prev, const void* send_prev,
                                           void* recv_next, size_t count, collx_datatype_t datatype, int32_t tag,
                                           collx_comm_t pp_comm, int64_t timeout_ms) {
  return free_call("collx_pp_exchange", [&] {
    return exchange("collx_pp_exchange", false, pp_comm, send_next, recv_prev, send_prev, recv_next, count, datatype,
                    tag, timeout_ms);
  });
}

COLLX_API collx_status_t collx_pp_exchange_ring(const void* send_next, void* recv_prev, const void* send_prev,
                                                void* recv_next, size_t count, collx_datatype_t datatype, int32_t tag,
                                                collx_comm_t pp_comm, int64_t timeout_ms) {
  return free_call("collx_pp_exchange_ring", [&] {
    return exchange("collx_pp_exchange_ring", true, pp_comm, send_next, recv_prev, send_prev, recv_next, count,
                    datatype, tag, timeout_ms);
  });
}

COLLX_API collx_status_t collx_pp_schedule_1f1b(int32_t pp_size, int32_t pp_rank, int32_t microbatches,
                                                collx_pp_action_t* actions, size_t cap, size_t* n) {
  if (pp_size < 1 || pp_rank < 0 || pp_rank >= pp_size || microbatches < 0 || !n)
    return free_fail(COLLX_ERR_INVALID_ARG,
                     "collx_pp_schedule_1f1b: need pp_size >= 1, 0 <= pp_rank < pp_size, microbatches >= 0, n");
  const int32_t warmup = std::min(pp_size - pp_rank - 1, microbatches);
  std::vector<collx_pp_action_t> out;
  int32_t fwd = 0, bwd = 0;
  auto forward = [&] { out.push_back({COLLX_PP_FORWARD, fwd++, 0}); };
  auto backward = [&] { out.push_back({COLLX_PP_BACKWARD, bwd, bwd == microbatches - 1 ? 1 : 0}), ++bwd; };
  for (int32_t i = 0; i < warmup; ++i) forward();
  for (int32_t i = 0; i < microbatches - warmup; ++i) {
    forward();
    backward();
  }
  while (bwd < microbatches) backward();
  *n = out.size();
  if (actions)
    for (size_t i = 0; i < out.size() && i < cap; ++i) actions[i] = out[i];
  return COLLX_OK;
}

}  // extern "C"
