// Grouped calls between forked processes over every transport: a ring exchange in the
// deadlocking order, fused all-reduces and a broadcast in one group, and a rank that does not
// group failing with a mismatch against the fused message.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/support/process_ranks.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {
namespace {

class GroupedBetweenProcesses : public ::testing::TestWithParam<TransportUnderTest> {};

int ring_fused_and_broadcast(int rank, int size, collx_comm_t comm) {
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const size_t big = 1 << 19;  // 2 MiB: a blocking send would wait for its receive
  std::vector<float> out(big), in(big, -1.0f);
  for (size_t i = 0; i < big; ++i) out[i] = static_cast<float>(rank * 3 + static_cast<int>(i % 1001)) * 0.25f;
  const int calls = 20;
  std::vector<std::vector<float>> send(calls), alone(calls), grouped(calls);
  for (int c = 0; c < calls; ++c) {
    send[c].resize(static_cast<size_t>(1 + c * 13));
    for (size_t i = 0; i < send[c].size(); ++i) send[c][i] = 0.37f * static_cast<float>(rank + 1) + 0.01f * static_cast<float>(c + i);
    alone[c].assign(send[c].size(), 0.0f);
    grouped[c].assign(send[c].size(), 0.0f);
    COLLX_CHILD_CHECK(collx_allreduce(send[c].data(), alone[c].data(), send[c].size(), COLLX_FLOAT32, COLLX_SUM, comm,
                                      nullptr) == COLLX_OK,
                      "%s", collx_last_error(comm));
  }
  int64_t token = rank == 1 ? 4242 : 0;
  COLLX_CHILD_CHECK(collx_group_start() == COLLX_OK, "start");
  COLLX_CHILD_CHECK(collx_send(out.data(), big, COLLX_FLOAT32, right, 1, comm, nullptr) == COLLX_OK, "send");
  for (int c = 0; c < calls; ++c) {
    COLLX_CHILD_CHECK(collx_allreduce(send[c].data(), grouped[c].data(), send[c].size(), COLLX_FLOAT32, COLLX_SUM, comm,
                                      nullptr) == COLLX_OK,
                      "record allreduce %d", c);
  }
  COLLX_CHILD_CHECK(collx_broadcast(&token, &token, 1, COLLX_INT64, 1, comm, nullptr) == COLLX_OK, "broadcast");
  COLLX_CHILD_CHECK(collx_recv(in.data(), big, COLLX_FLOAT32, left, 1, comm, nullptr) == COLLX_OK, "recv");
  COLLX_CHILD_CHECK(collx_group_end() == COLLX_OK, "%s", collx_last_error(nullptr));
  for (size_t i = 0; i < big; ++i) {
    COLLX_CHILD_CHECK(in[i] == static_cast<float>(left * 3 + static_cast<int>(i % 1001)) * 0.25f, "element %zu", i);
  }
  for (int c = 0; c < calls; ++c) {
    COLLX_CHILD_CHECK(std::memcmp(alone[c].data(), grouped[c].data(), alone[c].size() * sizeof(float)) == 0,
                      "fused call %d differs from the same call alone", c);
  }
  COLLX_CHILD_CHECK(token == 4242, "broadcast gave %lld", static_cast<long long>(token));
  return 0;
}

TEST_P(GroupedBetweenProcesses, RingFusedAllreducesAndBroadcastInOneGroup) {
  for (int size : {2, 4}) {
    auto results = run_comm_processes(size, 120000, ring_fused_and_broadcast, 30000, GetParam().mask);
    for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << size << " ranks: " << describe(results);
  }
}

TEST_P(GroupedBetweenProcesses, ARankThatDoesNotGroupGetsMismatchNotWrongData) {
  auto results = run_comm_processes(
      2, 60000,
      [](int rank, int, collx_comm_t comm) {
        float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[4] = {5, 6, 7, 8};
        collx_status_t rc;
        if (rank == 0) {
          collx_group_start();
          collx_allreduce(a, a, 4, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
          collx_allreduce(b, b, 4, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
          rc = collx_group_end();
        } else {
          rc = collx_allreduce(a, a, 8, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);  // same bytes, one call
        }
        COLLX_CHILD_CHECK(rc == COLLX_ERR_MISMATCH || rc == COLLX_ERR_REMOTE, "got %s", collx_status_name(rc));
        return 0;
      },
      20000, GetParam().mask);
  for (const RankResult& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(ProcessTier, GroupedBetweenProcesses, ::testing::ValuesIn(transports_under_test()),
                         TransportName());

}  // namespace
}  // namespace testing
}  // namespace collx
