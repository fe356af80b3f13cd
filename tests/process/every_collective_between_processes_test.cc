// Every collective (gather, scatter and allgatherv too) between forked processes over each transport built in (tcp, shm, ucx),
// bootstrapped through the TCP store that rank 0 hosts.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/process_ranks.h"
#include "tests/support/reference.h"
#include "tests/support/scoped_env.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {
namespace {

// Runs each collective once per (count, datatype) and checks the result inside the child.
int run_every_collective(int rank, int size, collx_comm_t comm) {
  const char* transport = "";
  COLLX_CHILD_CHECK(collx_comm_transport(comm, &transport) == COLLX_OK, "collx_comm_transport");
  const std::vector<collx_algorithm_t> allreduce_algorithms =
      with_shared_memory_on_shm(transport, {COLLX_ALGO_RING, COLLX_ALGO_RECURSIVE_DOUBLING});
  // Reduce-scatter and all-gather: the automatic choice, and shared memory where it exists.
  const std::vector<collx_algorithm_t> scatter_gather_algorithms =
      with_shared_memory_on_shm(transport, {COLLX_ALGO_AUTO});
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{300000}}) {
    for (collx_datatype_t dt : {COLLX_FLOAT32, COLLX_INT64, COLLX_BFLOAT16}) {
      const size_t elem = collx_datatype_size(dt);
      const size_t n = static_cast<size_t>(size);
      std::vector<unsigned char> send(count * n * elem + 8), recv(count * n * elem + 8);
      // allreduce with both algorithms
      for (collx_algorithm_t algo : allreduce_algorithms) {
        collx_opts_t opts;
        collx_opts_init(&opts, sizeof opts);
        opts.algorithm = algo;
        fill_input(send.data(), count, 0, rank, COLLX_SUM, dt);
        collx_status_t rc = collx_allreduce(send.data(), recv.data(), count, dt, COLLX_SUM, comm, &opts);
        COLLX_CHILD_CHECK(rc == COLLX_OK, "allreduce %s: %s", collx_status_name(rc), collx_last_error(comm));
        for (size_t i = 0; i < count; ++i) {
          COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) == reference_reduce(COLLX_SUM, dt, size, i),
                            "allreduce element %zu", i);
        }
      }
      for (collx_algorithm_t algo : scatter_gather_algorithms) {
      collx_opts_t opts;
      collx_opts_init(&opts, sizeof opts);
      opts.algorithm = algo;
      // reduce_scatter
      fill_input(send.data(), count * n, 0, rank, COLLX_MAX, dt);
      collx_status_t rc = collx_reduce_scatter(send.data(), recv.data(), count, dt, COLLX_MAX, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "reduce_scatter %s: %s", collx_status_name(rc), collx_last_error(comm));
      for (size_t i = 0; i < count; ++i) {
        COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) ==
                              reference_reduce(COLLX_MAX, dt, size, static_cast<size_t>(rank) * count + i),
                          "reduce_scatter element %zu", i);
      }
      // allgather
      fill_input(send.data(), count, 0, rank, COLLX_SUM, dt);
      rc = collx_allgather(send.data(), recv.data(), count, dt, comm, &opts);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "allgather %s: %s", collx_status_name(rc), collx_last_error(comm));
      for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < count; i += 7)
          COLLX_CHILD_CHECK(load_value(recv.data(), static_cast<size_t>(q) * count + i, dt) ==
                                input_value(q, i, COLLX_SUM, dt),
                            "allgather block %d element %zu", q, i);
      }
      // broadcast and reduce from the last rank
      const int root = size - 1;
      fill_input(send.data(), count, 0, rank, COLLX_SUM, dt);
      collx_status_t rc = collx_broadcast(send.data(), recv.data(), count, dt, root, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "broadcast %s: %s", collx_status_name(rc), collx_last_error(comm));
      for (size_t i = 0; i < count; ++i)
        COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) == input_value(root, i, COLLX_SUM, dt), "broadcast %zu", i);
      rc = collx_reduce(send.data(), recv.data(), count, dt, COLLX_SUM, root, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "reduce %s: %s", collx_status_name(rc), collx_last_error(comm));
      if (rank == root)
        for (size_t i = 0; i < count; ++i)
          COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) == reference_reduce(COLLX_SUM, dt, size, i), "reduce %zu", i);
      // alltoall
      fill_input(send.data(), count * n, 0, rank, COLLX_SUM, dt);
      rc = collx_alltoall(send.data(), recv.data(), count, dt, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "alltoall %s: %s", collx_status_name(rc), collx_last_error(comm));
      for (int q = 0; q < size; ++q)
        for (size_t i = 0; i < count; i += 5)
          COLLX_CHILD_CHECK(load_value(recv.data(), static_cast<size_t>(q) * count + i, dt) ==
                                input_value(q, static_cast<size_t>(rank) * count + i, COLLX_SUM, dt),
                            "alltoall block %d element %zu", q, i);
      // gather to and scatter from rank 1 % size (not the first rank): non-roots pass NULL for
      // the buffer they do not use
      const int mover = 1 % size;
      fill_input(send.data(), count, 0, rank, COLLX_SUM, dt);
      rc = collx_gather(send.data(), rank == mover ? recv.data() : nullptr, count, dt, mover, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "gather %s: %s", collx_status_name(rc), collx_last_error(comm));
      if (rank == mover)
        for (int q = 0; q < size; ++q)
          for (size_t i = 0; i < count; i += 5)
            COLLX_CHILD_CHECK(load_value(recv.data(), static_cast<size_t>(q) * count + i, dt) ==
                                  input_value(q, i, COLLX_SUM, dt),
                              "gather block %d element %zu", q, i);
      fill_input(send.data(), count * n, 0, rank, COLLX_SUM, dt);
      rc = collx_scatter(rank == mover ? send.data() : nullptr, recv.data(), count, dt, mover, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "scatter %s: %s", collx_status_name(rc), collx_last_error(comm));
      for (size_t i = 0; i < count; i += 5)
        COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) ==
                              input_value(mover, static_cast<size_t>(rank) * count + i, COLLX_SUM, dt),
                          "scatter element %zu", i);
      // allgatherv, uneven: odd ranks send half a block
      std::vector<size_t> counts(n);
      for (size_t q = 0; q < n; ++q) counts[q] = q % 2 == 0 ? count : count / 2;
      fill_input(send.data(), counts[static_cast<size_t>(rank)], 0, rank, COLLX_SUM, dt);
      rc = collx_allgatherv(send.data(), counts[static_cast<size_t>(rank)], recv.data(), counts.data(), nullptr, dt,
                            comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "allgatherv %s: %s", collx_status_name(rc), collx_last_error(comm));
      for (size_t q = 0, at = 0; q < n; at += counts[q], ++q)
        for (size_t i = 0; i < counts[q]; i += 5)
          COLLX_CHILD_CHECK(load_value(recv.data(), at + i, dt) == input_value(static_cast<int>(q), i, COLLX_SUM, dt),
                            "allgatherv block %zu element %zu", q, i);
      // send/recv around the ring
      fill_input(send.data(), count, 0, rank, COLLX_SUM, dt);
      const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
      collx_request_t sreq = nullptr;
      rc = collx_isend(send.data(), count, dt, next, 3, comm, nullptr, &sreq);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "isend %s: %s", collx_status_name(rc), collx_last_error(comm));
      rc = collx_recv(recv.data(), count, dt, prev, 3, comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "recv %s: %s", collx_status_name(rc), collx_last_error(comm));
      rc = collx_wait(sreq, -1);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "isend wait %s: %s", collx_status_name(rc), collx_last_error(comm));
      collx_request_free(sreq);
      for (size_t i = 0; i < count; ++i)
        COLLX_CHILD_CHECK(load_value(recv.data(), i, dt) == input_value(prev, i, COLLX_SUM, dt), "recv %zu", i);
      rc = collx_barrier(comm, nullptr);
      COLLX_CHILD_CHECK(rc == COLLX_OK, "barrier %s: %s", collx_status_name(rc), collx_last_error(comm));
    }
  }
  return 0;
}

class EveryTransport : public ::testing::TestWithParam<TransportUnderTest> {};

TEST_P(EveryTransport, EveryCollectiveIsCorrectBetweenProcesses) {
  for (int size : {2, 3, 4}) {
    SCOPED_TRACE("world size " + std::to_string(size) + " over " + GetParam().name);
    auto results = run_comm_processes(size, 120000, run_every_collective, 30000, GetParam().mask);
    for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  }
}

// Without cross-memory attach (ptrace-restricted containers): the shm transport pulls large
// messages through its rings and the shared-memory collectives copy through the boards.
TEST(WithoutCrossMemoryAttach, EveryCollectiveIsCorrectBetweenProcessesOverShm) {
  ScopedEnv no_cma("COLLX_SHM_NO_CMA", "1");
  auto results = run_comm_processes(3, 120000, run_every_collective, 30000, COLLX_TRANSPORT_SHM);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(ProcessTier, EveryTransport, ::testing::ValuesIn(transports_under_test()), TransportName());

}  // namespace
}  // namespace testing
}  // namespace collx
