// The staging plan of device-buffer collectives (see staging_plan.h).
#include "lib/core/staging_plan.h"

#include <algorithm>
#include <cstdint>

#include "lib/core/names.h"
#include "lib/dtype/datatype.h"

namespace collx {

namespace {

// Elements spanned by blocks (counts[r] at displs[r]).
size_t extent(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t end = 0;
  for (size_t r = 0; r < counts.size() && r < displs.size(); ++r) end = std::max(end, displs[r] + counts[r]);
  return end;
}

struct Blocks {
  size_t send_elements = 0;               // elements read from sendbuf (one range from it)
  std::vector<std::pair<size_t, size_t>> recv;  // (offset, elements) written in recvbuf
};

Blocks blocks_of(const CollCall& c, int rank, int size) {
  Blocks b;
  const bool root = c.root == rank;
  const size_t n = static_cast<size_t>(size);
  auto layout = [&](const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
    for (size_t r = 0; r < counts.size() && r < displs.size(); ++r) {
      if (counts[r] > 0) b.recv.emplace_back(displs[r], counts[r]);
    }
  };
  auto receive = [&](size_t elements) {
    if (elements > 0) b.recv.emplace_back(0, elements);
  };
  switch (c.coll) {
    case COLLX_COLL_ALLGATHERV:
      b.send_elements = c.count;
      layout(c.counts, c.displs);
      break;
    case COLLX_COLL_GATHERV:
      b.send_elements = c.count;
      if (root) layout(c.counts, c.displs);
      break;
    case COLLX_COLL_REDUCE_SCATTERV:
      b.send_elements = extent(c.counts, c.displs);
      receive(c.count);
      break;
    case COLLX_COLL_SCATTERV:
      b.send_elements = root ? extent(c.counts, c.displs) : 0;
      receive(c.count);
      break;
    case COLLX_COLL_ALLTOALLV:
      b.send_elements = extent(c.send_counts, c.send_displs);
      layout(c.counts, c.displs);
      break;
    // The fixed-size collectives: count elements per rank where the call says so.
    case COLLX_COLL_ALLREDUCE:
      b.send_elements = c.count;
      receive(c.count);
      break;
    case COLLX_COLL_REDUCE_SCATTER:
      b.send_elements = c.count * n;
      receive(c.count);
      break;
    case COLLX_COLL_ALLGATHER:
      b.send_elements = c.count;
      receive(c.count * n);
      break;
    case COLLX_COLL_ALLTOALL:
      b.send_elements = c.count * n;
      receive(c.count * n);
      break;
    case COLLX_COLL_BROADCAST:
      b.send_elements = root ? c.count : 0;
      receive(c.count);
      break;
    case COLLX_COLL_REDUCE:
      b.send_elements = c.count;
      if (root) receive(c.count);
      break;
    case COLLX_COLL_GATHER:
      b.send_elements = c.count;
      if (root) receive(c.count * n);
      break;
    case COLLX_COLL_SCATTER:
      b.send_elements = root ? c.count * n : 0;
      receive(c.count);
      break;
    default:
      break;
  }
  return b;
}

}  // namespace

Status plan_staging(const CollCall& call, int rank, int size, StagingPlan* plan) {
  if (call.coll == COLLX_COLL_BARRIER || call.coll == COLLX_COLL_SEND || call.coll == COLLX_COLL_RECV) {
    return make_status(COLLX_ERR_INTERNAL, "plan_staging: %s moves no collective buffers", coll_name(call.coll));
  }
  *plan = StagingPlan();
  const size_t element = datatype_size(call.datatype);
  Blocks b = blocks_of(call, rank, size);
  size_t recv_elements = 0;
  for (const auto& block : b.recv) recv_elements = std::max(recv_elements, block.first + block.second);
  const uintptr_t send = reinterpret_cast<uintptr_t>(call.sendbuf);
  const uintptr_t recv = reinterpret_cast<uintptr_t>(call.recvbuf);
  const size_t send_bytes = call.sendbuf ? b.send_elements * element : 0;
  const size_t recv_bytes = call.recvbuf ? recv_elements * element : 0;
  // In place: one buffer lies inside the other (validate_v() allows no other overlap; an
  // empty one counts when its address is inside or at the end of the other).
  const bool shared = call.sendbuf && call.recvbuf && send <= recv + recv_bytes && recv <= send + send_bytes;
  if (shared) {
    const uintptr_t base = std::min(send, recv);
    plan->send_at = send - base;
    plan->recv_at = recv - base;
    plan->bytes = std::max(send + send_bytes, recv + recv_bytes) - base;
  } else {
    // Apart: sendbuf's range first, recvbuf's after it on a 64-byte boundary.
    if (call.sendbuf) plan->send_at = 0;
    if (call.recvbuf) plan->recv_at = (send_bytes + 63) / 64 * 64;
    plan->bytes = call.recvbuf ? plan->recv_at + recv_bytes : send_bytes;
  }
  char* const device_send = static_cast<char*>(const_cast<void*>(call.sendbuf));
  char* const device_recv = static_cast<char*>(call.recvbuf);
  if (send_bytes > 0) plan->in.push_back({device_send, plan->send_at, send_bytes});
  // Received blocks in address order, neighbours merged: fewer copies for packed layouts.
  std::sort(b.recv.begin(), b.recv.end());
  for (const auto& block : b.recv) {
    if (!call.recvbuf) break;
    const size_t at = block.first * element, bytes = block.second * element;
    StagingPlan::Copy* last = plan->out.empty() ? nullptr : &plan->out.back();
    if (last && last->host + last->bytes == plan->recv_at + at) {
      last->bytes += bytes;
    } else {
      plan->out.push_back({device_recv + at, plan->recv_at + at, bytes});
    }
  }
  return Status::Ok();
}

}  // namespace collx
