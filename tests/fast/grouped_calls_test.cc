// Grouped calls (collx_group_start / collx_group_end) on ranks as threads: send/recv in any
// order, fused all-reduces against separate calls bit for bit, mixed groups, mismatches,
// nesting, errors and deadlines.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/scoped_env.h"
#include "tests/support/thread_ranks.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string last_error(collx_comm_t comm) { return collx_last_error(comm); }

// A value no rank's arithmetic produces by accident: depends on rank, message and element.
float pattern(int rank, int message, size_t i) {
  return static_cast<float>(rank * 1000003 + message * 7919 + static_cast<int>(i % 9973)) * 0.3711f;
}

struct RingCase {
  TransportUnderTest transport;
  int size;
};

std::vector<RingCase> ring_cases() {
  std::vector<RingCase> out;
  for (const TransportUnderTest& t : transports_under_test()) {
    for (int size : {2, 3, 8}) out.push_back(RingCase{t, size});
  }
  return out;
}

struct RingCaseName {
  std::string operator()(const ::testing::TestParamInfo<RingCase>& info) const {
    return info.param.transport.name + "_" + std::to_string(info.param.size) + "ranks";
  }
};

class GroupedRing : public ::testing::TestWithParam<RingCase> {
 protected:
  // Every rank sends `messages` vectors of `count` floats to its right neighbour and
  // receives as many from its left one, in the order `recv_first` says, all in one group.
  void run_ring(bool recv_first, int messages, size_t count) {
    ThreadRanks world(GetParam().size, /*timeout_ms=*/30000, GetParam().transport.mask);
    ASSERT_TRUE(world.ok()) << world.error();
    world.run([&](int rank, collx_comm_t comm) {
      const int n = world.size();
      const int right = (rank + 1) % n, left = (rank + n - 1) % n;
      std::vector<std::vector<float>> out(static_cast<size_t>(messages)), in(static_cast<size_t>(messages));
      for (int m = 0; m < messages; ++m) {
        out[m].resize(count);
        in[m].assign(count, -1.0f);
        for (size_t i = 0; i < count; ++i) out[m][i] = pattern(rank, m, i);
      }
      ASSERT_EQ(collx_group_start(), COLLX_OK);
      for (int m = 0; m < messages; ++m) {
        // Every message of the ring uses tag 5: they must arrive in the order sent.
        if (recv_first) {
          ASSERT_EQ(collx_recv(in[m].data(), count, COLLX_FLOAT32, left, 5, comm, nullptr), COLLX_OK);
          ASSERT_EQ(collx_send(out[m].data(), count, COLLX_FLOAT32, right, 5, comm, nullptr), COLLX_OK);
        } else {
          ASSERT_EQ(collx_send(out[m].data(), count, COLLX_FLOAT32, right, 5, comm, nullptr), COLLX_OK);
          ASSERT_EQ(collx_recv(in[m].data(), count, COLLX_FLOAT32, left, 5, comm, nullptr), COLLX_OK);
        }
      }
      ASSERT_EQ(collx_group_end(), COLLX_OK) << collx_last_error(nullptr);
      for (int m = 0; m < messages; ++m) {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(in[m][i], pattern(left, m, i)) << "rank " << rank << " message " << m << " element " << i;
        }
      }
    });
  }
};

// 2 MiB messages: a transport may hold a send this large until its receive is posted, so
// without the group every rank sending first could deadlock.
TEST_P(GroupedRing, SendRightThenReceiveLeftCompletes) { run_ring(/*recv_first=*/false, 1, 1 << 19); }
TEST_P(GroupedRing, ReceiveLeftThenSendRightCompletes) { run_ring(/*recv_first=*/true, 1, 1 << 19); }
TEST_P(GroupedRing, ManyMessagesToTheSamePeerArriveInOrder) { run_ring(/*recv_first=*/false, 6, 20000); }

INSTANTIATE_TEST_SUITE_P(Transports, GroupedRing, ::testing::ValuesIn(ring_cases()), RingCaseName());

class GroupedAllreduce : public ::testing::TestWithParam<TransportUnderTest> {};

// Many small all-reduces of several datatypes and ops (fused in threes and fours by the
// group) give exactly the bits of the same calls made one by one.
TEST_P(GroupedAllreduce, ManyFusedCallsMatchSeparateCallsBitForBit) {
  for (int size : {3, 4}) {
    ThreadRanks world(size, /*timeout_ms=*/30000, GetParam().mask);
    ASSERT_TRUE(world.ok()) << world.error();
    world.run([&](int rank, collx_comm_t comm) {
      struct Call {
        collx_datatype_t datatype;
        collx_op_t op;
        size_t count;
        double premul;
      };
      std::vector<Call> calls;
      for (int k = 0; k < 30; ++k) {
        const collx_op_t op = k % 5 == 0 ? COLLX_AVG : k % 7 == 0 ? COLLX_PREMUL_SUM : k % 3 == 0 ? COLLX_MAX : COLLX_SUM;
        const collx_datatype_t dt = k % 4 == 0 ? COLLX_FLOAT16 : k % 6 == 0 ? COLLX_FLOAT64 : COLLX_FLOAT32;
        calls.push_back(Call{dt, op, static_cast<size_t>(1 + (k * 337) % 1000), k % 2 ? 0.75 : 1.5});
      }
      std::vector<std::vector<char>> send(calls.size()), alone(calls.size()), grouped(calls.size());
      for (size_t k = 0; k < calls.size(); ++k) {
        const size_t es = collx_datatype_size(calls[k].datatype);
        send[k].resize(calls[k].count * es);
        for (size_t i = 0; i < calls[k].count; ++i) {
          const float v = pattern(rank, static_cast<int>(k), i) * 1e-4f;
          if (calls[k].datatype == COLLX_FLOAT32) std::memcpy(&send[k][i * es], &v, es);
          if (calls[k].datatype == COLLX_FLOAT64) {
            const double d = static_cast<double>(v) / 3.0;
            std::memcpy(&send[k][i * es], &d, es);
          }
          if (calls[k].datatype == COLLX_FLOAT16) {
            const uint16_t h = static_cast<uint16_t>(0x3000 + ((rank * 131 + k * 17 + i * 7) % 0x0c00));
            std::memcpy(&send[k][i * es], &h, es);
          }
        }
        alone[k].assign(send[k].size(), 0);
        grouped[k].assign(send[k].size(), 0);
      }
      collx_opts_t opts;
      collx_opts_init(&opts, sizeof opts);
      for (size_t k = 0; k < calls.size(); ++k) {
        opts.premul_scalar = calls[k].premul;
        ASSERT_EQ(collx_allreduce(send[k].data(), alone[k].data(), calls[k].count, calls[k].datatype, calls[k].op, comm,
                                  &opts),
                  COLLX_OK)
            << last_error(comm);
      }
      ASSERT_EQ(collx_group_start(), COLLX_OK);
      for (size_t k = 0; k < calls.size(); ++k) {
        opts.premul_scalar = calls[k].premul;
        // Half of them in place.
        void* out = grouped[k].data();
        if (k % 2) std::memcpy(out, send[k].data(), send[k].size());
        ASSERT_EQ(collx_allreduce(k % 2 ? out : send[k].data(), out, calls[k].count, calls[k].datatype, calls[k].op,
                                  comm, &opts),
                  COLLX_OK)
            << last_error(comm);
      }
      ASSERT_EQ(collx_group_end(), COLLX_OK) << collx_last_error(nullptr);
      for (size_t k = 0; k < calls.size(); ++k) {
        EXPECT_EQ(std::memcmp(alone[k].data(), grouped[k].data(), alone[k].size()), 0)
            << "call " << k << " (" << collx_datatype_name(calls[k].datatype) << ", " << collx_op_name(calls[k].op)
            << ", count " << calls[k].count << ") on rank " << rank << " of " << size;
      }
    });
  }
}

// A group mixing collectives, point-to-point and a nonblocking call, all of whose results are
// checked after collx_group_end.
TEST_P(GroupedAllreduce, MixedCollectivesAndPointToPointInOneGroup) {
  ThreadRanks world(4, /*timeout_ms=*/30000, GetParam().mask);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const int n = 4, right = (rank + 1) % n, left = (rank + n - 1) % n;
    int32_t a = rank + 1, a_sum = 0, b[3] = {rank, rank * 2, rank * 3}, b_max[3] = {};
    int64_t root_value[2] = {rank == 2 ? 77 : 0, rank == 2 ? -5 : 0};
    int32_t gathered[4] = {-1, -1, -1, -1};
    double to_right = rank * 0.5, from_left = -1;
    float nb_in = static_cast<float>(rank), nb_out = 0;
    collx_request_t request = nullptr;
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    ASSERT_EQ(collx_recv(&from_left, 1, COLLX_FLOAT64, left, 9, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_allreduce(&a, &a_sum, 1, COLLX_INT32, COLLX_SUM, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_broadcast(root_value, root_value, 2, COLLX_INT64, 2, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_iallreduce(&nb_in, &nb_out, 1, COLLX_FLOAT32, COLLX_SUM, comm, nullptr, &request), COLLX_OK);
    ASSERT_EQ(collx_allgather(&rank, gathered, 1, COLLX_INT32, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_send(&to_right, 1, COLLX_FLOAT64, right, 9, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_allreduce(b, b_max, 3, COLLX_INT32, COLLX_MAX, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_barrier(comm, nullptr), COLLX_OK);
    int done = 1;
    EXPECT_EQ(collx_test(request, &done), COLLX_OK);
    EXPECT_EQ(done, 0) << "a recorded call runs only at collx_group_end";
    ASSERT_EQ(collx_group_end(), COLLX_OK) << collx_last_error(nullptr);
    EXPECT_EQ(collx_wait(request, 5000), COLLX_OK);
    collx_request_free(request);
    EXPECT_EQ(a_sum, 1 + 2 + 3 + 4);
    EXPECT_EQ(b_max[0], 3);
    EXPECT_EQ(b_max[2], 9);
    EXPECT_EQ(root_value[0], 77);
    EXPECT_EQ(root_value[1], -5);
    for (int r = 0; r < n; ++r) EXPECT_EQ(gathered[r], r);
    EXPECT_EQ(from_left, left * 0.5);
    EXPECT_EQ(nb_out, 0.0f + 1 + 2 + 3);
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, GroupedAllreduce, ::testing::ValuesIn(transports_under_test()), TransportName());

// Ranks that group different all-reduces (other counts, another order, or no group at all)
// get COLLX_ERR_MISMATCH from the fused message, never cut data.
class GroupedMismatch : public ::testing::TestWithParam<TransportUnderTest> {};

TEST_P(GroupedMismatch, RanksThatGroupDifferentCallsGetMismatchNotWrongData) {
  enum Shape { kOtherOrder, kUngroupedPeer };
  for (Shape shape : {kOtherOrder, kUngroupedPeer}) {
    ThreadRanks world(2, /*timeout_ms=*/20000, GetParam().mask);
    ASSERT_TRUE(world.ok()) << world.error();
    std::vector<collx_status_t> rc(2, COLLX_OK);
    std::vector<std::string> msg(2);
    const auto start = Clock::now();
    world.run([&](int rank, collx_comm_t comm) {
      std::vector<float> x(8, 1.0f), y(8, 2.0f);
      // Both ranks move 8 floats in all, cut 3 + 5 on rank 0 and 5 + 3 on rank 1.
      const size_t first = rank == 0 ? 3 : 5, second = 8 - first;
      const bool grouped = shape == kOtherOrder || rank == 0;
      if (grouped) collx_group_start();
      collx_status_t a = collx_allreduce(x.data(), x.data(), first, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
      collx_status_t b = a != COLLX_OK ? a : collx_allreduce(y.data(), y.data(), second, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
      rc[rank] = b;
      if (grouped) rc[rank] = collx_group_end();
      msg[rank] = grouped ? collx_last_error(nullptr) : last_error(comm);
      if (grouped) {
        EXPECT_EQ(a, COLLX_OK);
      }
    });
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
    bool named_fusion = false;
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("shape " + std::to_string(shape) + ", rank " + std::to_string(r) + ": " + msg[r]);
      EXPECT_TRUE(rc[r] == COLLX_ERR_MISMATCH || rc[r] == COLLX_ERR_REMOTE) << collx_status_name(rc[r]);
      if (msg[r].find("fused by a group") != std::string::npos) named_fusion = true;
    }
    EXPECT_TRUE(named_fusion) << "the message should say the calls were fused";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, GroupedMismatch, ::testing::ValuesIn(transports_under_test()), TransportName());

// Two communicators named in opposite orders by neighbouring ranks: each runs concurrently.
TEST(GroupedCalls, TwoCommunicatorsInEitherOrderComplete) {
  ThreadRanks world(4, /*timeout_ms=*/30000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    collx_comm_t other = nullptr;
    ASSERT_EQ(collx_comm_dup(comm, &other), COLLX_OK) << last_error(comm);
    std::vector<int32_t> big(1 << 18, rank), big_sum(1 << 18, 0);  // large: not fused, ring
    int32_t small = rank, small_sum = 0;
    // The big all-reduce on `comm`, the small one on `other`: even ranks record them in that
    // order, odd ranks the other way round.
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == (rank % 2 == 0)) {
        ASSERT_EQ(collx_allreduce(big.data(), big_sum.data(), big.size(), COLLX_INT32, COLLX_SUM, comm, nullptr),
                  COLLX_OK);
      } else {
        ASSERT_EQ(collx_allreduce(&small, &small_sum, 1, COLLX_INT32, COLLX_SUM, other, nullptr), COLLX_OK);
      }
    }
    ASSERT_EQ(collx_group_end(), COLLX_OK) << collx_last_error(nullptr);
    EXPECT_EQ(small_sum, 0 + 1 + 2 + 3);
    EXPECT_EQ(big_sum[12345], 0 + 1 + 2 + 3);
    collx_comm_destroy(other);
  });
}

TEST(GroupErrors, GroupEndWithoutStartIsInvalidUsage) {
  EXPECT_EQ(collx_group_end(), COLLX_ERR_INVALID_USAGE);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("without a matching collx_group_start"), std::string::npos)
      << collx_last_error(nullptr);
}

// start/start/end/end: only the outermost end runs the calls.
TEST(GroupErrors, NestedGroupsRunAtTheOutermostEnd) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    int32_t mine = rank + 1, sum = -1;
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    ASSERT_EQ(collx_allreduce(&mine, &sum, 1, COLLX_INT32, COLLX_SUM, comm, nullptr), COLLX_OK);
    ASSERT_EQ(collx_group_end(), COLLX_OK);
    EXPECT_EQ(sum, -1) << "the inner end must not run anything";
    ASSERT_EQ(collx_group_end(), COLLX_OK) << collx_last_error(nullptr);
    EXPECT_EQ(sum, 3);
  });
}

TEST(GroupErrors, WaitingOnARecordedRequestInsideTheGroupIsInvalidUsage) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    int32_t mine = rank + 1, sum = -1;
    collx_request_t request = nullptr;
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    ASSERT_EQ(collx_iallreduce(&mine, &sum, 1, COLLX_INT32, COLLX_SUM, comm, nullptr, &request), COLLX_OK);
    EXPECT_EQ(collx_wait(request, -1), COLLX_ERR_INVALID_USAGE);
    EXPECT_NE(last_error(comm).find("open group"), std::string::npos) << last_error(comm);
    ASSERT_EQ(collx_group_end(), COLLX_OK) << collx_last_error(nullptr);
    EXPECT_EQ(collx_wait(request, 5000), COLLX_OK);
    EXPECT_EQ(sum, 3);
    collx_request_free(request);
  });
}

// A bad argument is refused by the call itself; collx_group_end then fails naming it, runs
// nothing, and the communicator stays usable.
TEST(GroupErrors, InvalidArgumentIsReportedAtTheCallAndByGroupEnd) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    int32_t mine = rank + 1, sum = -1;
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    ASSERT_EQ(collx_allreduce(&mine, &sum, 1, COLLX_INT32, COLLX_SUM, comm, nullptr), COLLX_OK);
    EXPECT_EQ(collx_send(&mine, 1, COLLX_INT32, /*peer=*/7, 0, comm, nullptr), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(collx_group_end(), COLLX_ERR_INVALID_ARG);
    const std::string msg = collx_last_error(nullptr);
    EXPECT_NE(msg.find("call 2 of a group"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ran nothing"), std::string::npos) << msg;
    EXPECT_EQ(sum, -1);
    ASSERT_EQ(collx_allreduce(&mine, &sum, 1, COLLX_INT32, COLLX_SUM, comm, nullptr), COLLX_OK) << last_error(comm);
    EXPECT_EQ(sum, 3);
  });
}

// Rank 1 never joins: rank 0's group ends by its calls' deadlines with COLLX_ERR_TIMEOUT
// naming the call, and leaves the communicator failed like a failed collective.
TEST(GroupErrors, AFailedCallFailsTheGroupByItsDeadline) {
  ThreadRanks world(2, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    if (rank != 0) return;
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof opts);
    opts.timeout_ms = 300;
    int32_t x = 1, y = 0, z = 0;
    const auto start = Clock::now();
    ASSERT_EQ(collx_group_start(), COLLX_OK);
    ASSERT_EQ(collx_recv(&z, 1, COLLX_INT32, 1, 3, comm, &opts), COLLX_OK);
    ASSERT_EQ(collx_allreduce(&x, &y, 1, COLLX_INT32, COLLX_SUM, comm, &opts), COLLX_OK);
    const collx_status_t rc = collx_group_end();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_EQ(rc, COLLX_ERR_TIMEOUT) << collx_status_name(rc);
    const std::string msg = collx_last_error(nullptr);
    EXPECT_NE(msg.find("of 2 in the group"), std::string::npos) << msg;
    EXPECT_EQ(last_error(comm), msg);
    EXPECT_LT(seconds, 5.0);
    collx_status_t async = COLLX_OK;
    EXPECT_EQ(collx_comm_get_async_error(comm, &async), COLLX_OK);
    EXPECT_NE(async, COLLX_OK) << "the communicator fails as after a failed collective";
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
