// Context parallelism: the ring rotation of K/V blocks for ring attention. Block i of the
// rotation is used while transfer i (send it to r+1, receive block i+1 from r-1 into the
// other half of the caller's double buffer) runs; every wait ends by the ring's deadline.
// Device buffers: the transfers are ordered on the parallel stream current at start.
#include <cstdint>
#include <memory>
#include <string>

#include "lib/common/deadline.h"
#include "parallel/device_buffers.h"
#include "parallel/free_calls.h"

struct collx_cp_ring_s {
  collx_comm_t comm = nullptr;
  int32_t rank = 0, size = 1;
  char* work = nullptr;  // 2 * bytes: the halves alternate as receive buffers
  size_t count = 0, bytes = 0;
  collx_datatype_t datatype = COLLX_FLOAT32;
  int32_t tag = 0;
  int64_t timeout_ms = -1;
  collx_opts_t opts{};            // device buffers: the thread's parallel stream at start
  int32_t step = 0;               // blocks handed out so far
  int recv_half = 0;              // the half the receive in flight writes
  const char* current = nullptr;  // the block being sent (the last one handed out)
  collx_request_t send = nullptr, recv = nullptr;
  collx_status_t failed = COLLX_OK;  // the first error; the ring is broken after it
  std::string error;                 // its message
};

namespace collx {
namespace parallel {
namespace {

int32_t prev_of(const collx_cp_ring_s& g) { return (g.rank + g.size - 1) % g.size; }
int32_t next_of(const collx_cp_ring_s& g) { return (g.rank + 1) % g.size; }
int32_t source_of(const collx_cp_ring_s& g, int32_t step) { return (g.rank - step % g.size + g.size) % g.size; }

collx_status_t ring_fail(collx_cp_ring_s* g, collx_status_t st, const std::string& msg) {
  if (g->failed == COLLX_OK) {
    g->failed = st;
    g->error = msg;
  }
  // The transfers go on without their handles (buffers are the caller's: documented).
  collx_request_free(g->send);
  collx_request_free(g->recv);
  g->send = g->recv = nullptr;
  return free_fail(st, msg);
}

// Transfer `step`: the block just handed out (`current`) to r+1, block step+1 from r-1.
collx_status_t post(collx_cp_ring_s* g, const char* fn) {
  char* into = g->work + static_cast<size_t>(g->recv_half) * g->bytes;
  collx_status_t st = collx_irecv(into, g->count, g->datatype, prev_of(*g), g->tag, g->comm, &g->opts, &g->recv);
  if (st == COLLX_OK)
    st = collx_isend(g->current, g->count, g->datatype, next_of(*g), g->tag, g->comm, &g->opts, &g->send);
  if (st != COLLX_OK) {
    comm_fail(g->comm, st, fn);
    return ring_fail(g, st, thread_error());
  }
  return COLLX_OK;
}

std::string transfer_name(const collx_cp_ring_s& g, bool send) {
  // The transfer in flight belongs to the last block handed out (transfer 0 before any).
  const int32_t step = g.step > 0 ? g.step - 1 : 0;
  return send ? "send of rank " + std::to_string(source_of(g, step)) + "'s block to rank " + std::to_string(next_of(g))
              : "receive of rank " + std::to_string(source_of(g, step + 1)) + "'s block from rank " +
                    std::to_string(prev_of(g));
}

// Waits for the transfer in flight, both halves within one deadline.
collx_status_t wait_transfer(collx_cp_ring_s* g, const char* fn) {
  const Deadline deadline = Deadline::after_ms(g->timeout_ms);
  for (collx_request_t* req : {&g->recv, &g->send}) {
    if (!*req) continue;
    collx_status_t st = collx_wait(*req, g->timeout_ms < 0 ? -1 : deadline.remaining_ms());
    const std::string what = transfer_name(*g, req == &g->send);
    if (st == COLLX_IN_PROGRESS)
      return ring_fail(g, COLLX_ERR_TIMEOUT,
                       std::string(fn) + ": the " + what + " (ring step " + std::to_string(g->step - 1) + " on rank " +
                           std::to_string(g->rank) + ") did not finish within " + std::to_string(g->timeout_ms) +
                           " ms");
    if (st != COLLX_OK) {
      comm_fail(g->comm, st, fn);
      return ring_fail(g, st, thread_error() + " (the " + what + ")");
    }
    collx_request_free(*req);
    *req = nullptr;
  }
  return COLLX_OK;
}

collx_status_t next(collx_cp_ring_s* g, const void** block, int32_t* source, const char* fn) {
  if (g->failed != COLLX_OK)
    return free_fail(COLLX_ERR_INVALID_USAGE,
                     std::string(fn) + ": an earlier call on this ring failed (" + g->error + "); finish it");
  if (g->step == g->size) {  // every block handed out
    *block = nullptr;
    *source = -1;
    return COLLX_OK;
  }
  if (g->step > 0) {
    collx_status_t st = wait_transfer(g, fn);
    if (st != COLLX_OK) return st;
    g->current = g->work + static_cast<size_t>(g->recv_half) * g->bytes;
    g->recv_half ^= 1;  // the other half's send has completed: it may receive now
  }
  ++g->step;
  // Transfer 0 was posted by start; the last block is not passed on.
  if (g->step > 1 && g->step < g->size) {
    collx_status_t st = post(g, fn);
    if (st != COLLX_OK) return st;
  }
  *block = g->current;
  *source = source_of(*g, g->step - 1);
  return COLLX_OK;
}

// Never blocks: tests (and so progresses) both halves of the transfer in flight.
collx_status_t test(collx_cp_ring_s* g, int* arrived) {
  const char* fn = "collx_cp_ring_test";
  *arrived = 0;
  if (g->failed != COLLX_OK)
    return free_fail(COLLX_ERR_INVALID_USAGE,
                     std::string(fn) + ": an earlier call on this ring failed (" + g->error + "); finish it");
  int all = 1;
  for (collx_request_t req : {g->recv, g->send}) {
    if (!req) continue;
    int done = 0;
    collx_status_t st = collx_test(req, &done);
    if (st != COLLX_OK) {
      comm_fail(g->comm, st, fn);
      return ring_fail(g, st, thread_error() + " (the " + transfer_name(*g, req == g->send) + ")");
    }
    all &= done;
  }
  *arrived = all;
  return COLLX_OK;
}

collx_status_t start(collx_comm_t comm, const void* block, void* work, size_t count, collx_datatype_t dt, int32_t tag,
                     int64_t timeout_ms, collx_cp_ring_t* out) {
  const char* fn = "collx_cp_ring_start";
  if (!out) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": ring (output) is NULL");
  *out = nullptr;
  if (!comm) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": cp_comm is NULL");
  GroupShape shape;
  collx_status_t st = group_shape(comm, fn, &shape);
  if (st != COLLX_OK) return st;
  const size_t elem = collx_datatype_size(dt);
  if (elem == 0) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": unknown datatype " + std::to_string(dt));
  if (tag < 0) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": tag " + std::to_string(tag) + " < 0");
  if (count > SIZE_MAX / 2 / elem)
    return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": count " + std::to_string(count) + " is too large");
  const size_t bytes = count * elem;
  // An empty block would come back as NULL, which means "no more blocks".
  if (count == 0) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": count is 0 (nothing to rotate)");
  if (!block) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": block is NULL");
  if (shape.size > 1) {
    if (!work) return free_fail(COLLX_ERR_INVALID_ARG, std::string(fn) + ": work (2 * count elements) is NULL");
    const char* b = static_cast<const char*>(block);
    const char* w = static_cast<const char*>(work);
    if (b < w + 2 * bytes && w < b + bytes)
      return free_fail(COLLX_ERR_INVALID_ARG,
                       std::string(fn) + ": work overlaps block (the received blocks would overwrite it)");
  }
  auto ring = std::make_unique<collx_cp_ring_s>();
  ring->comm = comm;
  ring->rank = static_cast<int32_t>(shape.rank);
  ring->size = static_cast<int32_t>(shape.size);
  ring->current = static_cast<const char*>(block);  // block 0: the caller's own
  ring->work = static_cast<char*>(work);
  ring->count = count;
  ring->bytes = bytes;
  ring->datatype = dt;
  ring->tag = tag;
  ring->timeout_ms = timeout_ms;
  ring->opts = stream_opts();
  if (ring->size > 1) {
    st = post(ring.get(), fn);
    if (st != COLLX_OK) return st;
  }
  *out = ring.release();
  return COLLX_OK;
}

}  // namespace
}  // namespace parallel
}  // namespace collx

// The C entry points: NULL outputs are refused here, every message goes to
// collx_last_error(NULL) (this thread), and nothing thrown crosses the ABI.
namespace cp = collx::parallel;
extern "C" {

COLLX_API collx_status_t collx_cp_ring_start(collx_comm_t cp_comm, const void* block, void* work, size_t count,
                                             collx_datatype_t datatype, int32_t tag, int64_t timeout_ms,
                                             collx_cp_ring_t* ring) {
  return cp::free_call("collx_cp_ring_start",
                       [&] { return cp::start(cp_comm, block, work, count, datatype, tag, timeout_ms, ring); });
}

COLLX_API collx_status_t collx_cp_ring_next(collx_cp_ring_t ring, const void** block, int32_t* source) {
  return cp::free_call("collx_cp_ring_next", [&]() -> collx_status_t {
    if (!ring || !block || !source)
      return cp::free_fail(COLLX_ERR_INVALID_ARG, std::string("collx_cp_ring_next: ") +
                                                      (!ring    ? "ring"
                                                       : !block ? "block (output)"
                                                                : "source (output)") +
                                                      " is NULL");
    return cp::next(ring, block, source, "collx_cp_ring_next");
  });
}

COLLX_API collx_status_t collx_cp_ring_test(collx_cp_ring_t ring, int* arrived) {
  return cp::free_call("collx_cp_ring_test", [&]() -> collx_status_t {
    if (!ring || !arrived)
      return cp::free_fail(COLLX_ERR_INVALID_ARG,
                           std::string("collx_cp_ring_test: ") + (!ring ? "ring" : "arrived (output)") + " is NULL");
    return cp::test(ring, arrived);
  });
}

COLLX_API collx_status_t collx_cp_ring_finish(collx_cp_ring_t ring) {
  if (!ring) return COLLX_OK;
  std::unique_ptr<collx_cp_ring_s> owned(ring);
  return cp::free_call("collx_cp_ring_finish", [&]() -> collx_status_t {
    if (ring->failed != COLLX_OK)
      return cp::free_fail(ring->failed, "collx_cp_ring_finish: the ring failed earlier: " + ring->error);
    // Pass the remaining blocks on: the neighbours are waiting for them.
    const void* block = nullptr;
    int32_t source = 0;
    do {
      collx_status_t st = cp::next(ring, &block, &source, "collx_cp_ring_finish");
      if (st != COLLX_OK) return st;
    } while (block);
    return COLLX_OK;
  });
}

}  // extern "C"
