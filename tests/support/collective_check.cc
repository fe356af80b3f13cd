#include "tests/support/collective_check.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "tests/support/reference.h"

namespace collx {
namespace testing {

std::string CollCase::name() const {
  std::string out = std::string(collx_coll_name(coll)) + "/" + collx_algorithm_name(algorithm) + "/" +
                    case_name(datatype, op, count, in_place);
  if (coll == COLLX_COLL_BROADCAST || coll == COLLX_COLL_REDUCE || coll == COLLX_COLL_GATHER ||
      coll == COLLX_COLL_SCATTER) {
    out += "/root=" + std::to_string(root);
  }
  if (nonblocking) out += "/nonblocking";
  return out;
}

namespace {

bool reduces(collx_coll_t coll) {
  return coll == COLLX_COLL_ALLREDUCE || coll == COLLX_COLL_REDUCE_SCATTER || coll == COLLX_COLL_REDUCE;
}

// The op used for inputs: non-reducing collectives just move data (SUM-style inputs).
collx_op_t input_op(const CollCase& c) { return reduces(c.coll) ? c.op : COLLX_SUM; }

collx_status_t call(const CollCase& c, const void* send, void* recv, collx_comm_t comm) {
  collx_opts_t opts;
  collx_opts_init(&opts, sizeof opts);
  opts.algorithm = c.algorithm;
  opts.premul_scalar = c.premul;
  if (c.nonblocking) {
    collx_request_t req = nullptr;
    collx_status_t rc = COLLX_OK;
    switch (c.coll) {
      case COLLX_COLL_ALLREDUCE: rc = collx_iallreduce(send, recv, c.count, c.datatype, c.op, comm, &opts, &req); break;
      case COLLX_COLL_REDUCE_SCATTER: rc = collx_ireduce_scatter(send, recv, c.count, c.datatype, c.op, comm, &opts, &req); break;
      case COLLX_COLL_ALLGATHER: rc = collx_iallgather(send, recv, c.count, c.datatype, comm, &opts, &req); break;
      case COLLX_COLL_BROADCAST: rc = collx_ibroadcast(send, recv, c.count, c.datatype, c.root, comm, &opts, &req); break;
      case COLLX_COLL_REDUCE: rc = collx_ireduce(send, recv, c.count, c.datatype, c.op, c.root, comm, &opts, &req); break;
      case COLLX_COLL_ALLTOALL: rc = collx_ialltoall(send, recv, c.count, c.datatype, comm, &opts, &req); break;
      case COLLX_COLL_GATHER: rc = collx_igather(send, recv, c.count, c.datatype, c.root, comm, &opts, &req); break;
      case COLLX_COLL_SCATTER: rc = collx_iscatter(send, recv, c.count, c.datatype, c.root, comm, &opts, &req); break;
      default: return COLLX_ERR_INVALID_ARG;
    }
    if (rc != COLLX_OK) return rc;
    rc = collx_wait(req, -1);
    collx_request_free(req);
    return rc;
  }
  switch (c.coll) {
    case COLLX_COLL_ALLREDUCE: return collx_allreduce(send, recv, c.count, c.datatype, c.op, comm, &opts);
    case COLLX_COLL_REDUCE_SCATTER: return collx_reduce_scatter(send, recv, c.count, c.datatype, c.op, comm, &opts);
    case COLLX_COLL_ALLGATHER: return collx_allgather(send, recv, c.count, c.datatype, comm, &opts);
    case COLLX_COLL_BROADCAST: return collx_broadcast(send, recv, c.count, c.datatype, c.root, comm, &opts);
    case COLLX_COLL_REDUCE: return collx_reduce(send, recv, c.count, c.datatype, c.op, c.root, comm, &opts);
    case COLLX_COLL_ALLTOALL: return collx_alltoall(send, recv, c.count, c.datatype, comm, &opts);
    case COLLX_COLL_GATHER: return collx_gather(send, recv, c.count, c.datatype, c.root, comm, &opts);
    case COLLX_COLL_SCATTER: return collx_scatter(send, recv, c.count, c.datatype, c.root, comm, &opts);
    default: return COLLX_ERR_INVALID_ARG;
  }
}

}  // namespace

size_t run_and_check(ThreadRanks& world, const CollCase& c) {
  const int n = world.size();
  const size_t elem = collx_datatype_size(c.datatype);
  const collx_op_t in_op = input_op(c);
  // Element counts of each rank's send and receive buffers.
  size_t send_count = c.count, recv_count = c.count;
  if (c.coll == COLLX_COLL_REDUCE_SCATTER) send_count = c.count * n;
  if (c.coll == COLLX_COLL_ALLGATHER) recv_count = c.count * n;
  if (c.coll == COLLX_COLL_ALLTOALL) send_count = recv_count = c.count * n;
  if (c.coll == COLLX_COLL_GATHER) recv_count = c.count * n;   // on the root
  if (c.coll == COLLX_COLL_SCATTER) send_count = c.count * n;  // on the root

  // Expected values, computed once (they do not depend on the receiving rank except for
  // reduce_scatter and alltoall, handled per rank below).
  std::vector<double> expected_reduced;
  if (reduces(c.coll)) {
    size_t span = c.coll == COLLX_COLL_REDUCE_SCATTER ? send_count : c.count;
    expected_reduced.resize(span);
    for (size_t i = 0; i < span; ++i) expected_reduced[i] = reference_reduce(c.op, c.datatype, n, i, c.premul, c.salt);
  }

  std::atomic<size_t> wrong_total{0};
  world.run([&](int rank, collx_comm_t comm) {
    // In place the send data lives inside the receive buffer at the API's offset.
    std::vector<unsigned char> recv((recv_count > send_count ? recv_count : send_count) * elem + 64, 0xAB);
    std::vector<unsigned char> send(send_count * elem + 64, 0xCD);
    void* recv_ptr = recv.data();
    const void* send_ptr = send.data();
    size_t in_place_offset = 0;  // elements
    // Gather and scatter: the root's big buffer is the only one with an in-place form, and
    // the other ranks pass NULL for the buffer they do not use (collx.h allows it).
    const bool rooted_movement = c.coll == COLLX_COLL_GATHER || c.coll == COLLX_COLL_SCATTER;
    if (rooted_movement && rank != c.root) {
      if (c.coll == COLLX_COLL_GATHER) recv_ptr = nullptr;
      if (c.coll == COLLX_COLL_SCATTER) send_ptr = nullptr;
    }
    if (c.in_place && (!rooted_movement || rank == c.root)) {
      if (c.coll == COLLX_COLL_ALLGATHER || c.coll == COLLX_COLL_GATHER) {
        in_place_offset = static_cast<size_t>(rank) * c.count;
      }
      send_ptr = static_cast<unsigned char*>(recv_ptr) + in_place_offset * elem;
      if (c.coll == COLLX_COLL_REDUCE_SCATTER || c.coll == COLLX_COLL_SCATTER) {
        // sendbuf is the big buffer; recvbuf sits at rank * recvcount inside it.
        send_ptr = recv_ptr;
        recv_ptr = static_cast<unsigned char*>(recv.data()) + static_cast<size_t>(rank) * c.count * elem;
      }
    }
    if (send_ptr) fill_input(const_cast<void*>(send_ptr), send_count, 0, rank, in_op, c.datatype, c.salt);
    collx_status_t rc = call(c, send_ptr, recv_ptr, comm);
    if (rc != COLLX_OK) {
      ADD_FAILURE() << c.name() << " rank " << rank << ": " << collx_status_name(rc) << ": " << collx_last_error(comm);
      wrong_total += recv_count;
      return;
    }
    size_t wrong = 0, first_wrong = SIZE_MAX;
    double first_expected = 0, first_got = 0;
    auto check = [&](size_t i, double expected) {
      double got = load_value(recv_ptr, i, c.datatype);
      if (!values_match(expected, got, c.datatype, c.op)) {
        if (first_wrong == SIZE_MAX) {
          first_wrong = i;
          first_expected = expected;
          first_got = got;
        }
        ++wrong;
      }
    };
    switch (c.coll) {
      case COLLX_COLL_ALLREDUCE:
        for (size_t i = 0; i < c.count; ++i) check(i, expected_reduced[i]);
        break;
      case COLLX_COLL_REDUCE:
        if (rank == c.root) for (size_t i = 0; i < c.count; ++i) check(i, expected_reduced[i]);
        break;
      case COLLX_COLL_REDUCE_SCATTER:
        for (size_t i = 0; i < c.count; ++i) check(i, expected_reduced[static_cast<size_t>(rank) * c.count + i]);
        break;
      case COLLX_COLL_ALLGATHER:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < c.count; ++i)
            check(static_cast<size_t>(q) * c.count + i, input_value(q, i, in_op, c.datatype, c.salt));
        break;
      case COLLX_COLL_BROADCAST:
        for (size_t i = 0; i < c.count; ++i) check(i, input_value(c.root, i, in_op, c.datatype, c.salt));
        break;
      case COLLX_COLL_GATHER:
        if (rank == c.root)
          for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < c.count; ++i)
              check(static_cast<size_t>(q) * c.count + i, input_value(q, i, in_op, c.datatype, c.salt));
        break;
      case COLLX_COLL_SCATTER:
        for (size_t i = 0; i < c.count; ++i)
          check(i, input_value(c.root, static_cast<size_t>(rank) * c.count + i, in_op, c.datatype, c.salt));
        break;
      case COLLX_COLL_ALLTOALL:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < c.count; ++i)
            check(static_cast<size_t>(q) * c.count + i,
                  input_value(q, static_cast<size_t>(rank) * c.count + i, in_op, c.datatype, c.salt));
        break;
      default:
        break;
    }
    if (wrong > 0) {
      ADD_FAILURE() << c.name() << " rank " << rank << " of " << n << ": " << wrong << " wrong elements; first at "
                    << first_wrong << ": expected " << first_expected << ", got " << first_got;
    }
    wrong_total += wrong;
  });
  return wrong_total.load();
}

}  // namespace testing
}  // namespace collx
