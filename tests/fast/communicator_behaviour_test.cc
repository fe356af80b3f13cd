// Communicator behaviour on ranks as threads: queries, split/dup, barrier, point to point,
// nonblocking calls and their ordering.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "tests/support/collective_check.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

TEST(CommunicatorQueries, RankSizeAndLocalRankOfThreadsOnOneHost) {
  ThreadRanks world(4);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    int32_t r = -1, s = -1, lr = -1, ls = -1;
    ASSERT_EQ(collx_comm_rank(comm, &r), COLLX_OK);
    ASSERT_EQ(collx_comm_size(comm, &s), COLLX_OK);
    ASSERT_EQ(collx_comm_local_rank(comm, &lr), COLLX_OK);
    ASSERT_EQ(collx_comm_local_size(comm, &ls), COLLX_OK);
    EXPECT_EQ(r, rank);
    EXPECT_EQ(s, 4);
    EXPECT_EQ(lr, rank);  // every thread is on this host
    EXPECT_EQ(ls, 4);
    collx_status_t async_error = COLLX_ERR_INTERNAL;
    EXPECT_EQ(collx_comm_get_async_error(comm, &async_error), COLLX_OK);
    EXPECT_EQ(async_error, COLLX_OK);
  });
}

TEST(CommunicatorSplit, GroupsByColorAndOrdersByKeyThenRank) {
  ThreadRanks world(5);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const int color = rank % 2;
    const int key = -rank;  // reverse order inside each color
    collx_comm_t sub = nullptr;
    ASSERT_EQ(collx_comm_split(comm, color, key, &sub), COLLX_OK) << collx_last_error(comm);
    ASSERT_NE(sub, nullptr);
    int32_t sub_rank = -1, sub_size = -1;
    collx_comm_rank(sub, &sub_rank);
    collx_comm_size(sub, &sub_size);
    // color 0: world ranks {0,2,4} -> keys {0,-2,-4} -> order 4,2,0. color 1: {1,3} -> 3,1.
    const int expected_size = color == 0 ? 3 : 2;
    EXPECT_EQ(sub_size, expected_size);
    const int index_from_top = (color == 0 ? 4 - rank : 3 - rank) / 2;
    EXPECT_EQ(sub_rank, index_from_top);
    // The new communicator works and contains exactly its color's ranks.
    int32_t mine = rank, sum = -1;
    ASSERT_EQ(collx_allreduce(&mine, &sum, 1, COLLX_INT32, COLLX_SUM, sub, nullptr), COLLX_OK) << collx_last_error(sub);
    EXPECT_EQ(sum, color == 0 ? 0 + 2 + 4 : 1 + 3);
    EXPECT_EQ(collx_comm_destroy(sub), COLLX_OK);
  });
}

TEST(CommunicatorSplit, NoColorGivesNullAndOthersStillGetTheirGroup) {
  ThreadRanks world(3);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    collx_comm_t sub = reinterpret_cast<collx_comm_t>(0x1);
    const int color = rank == 1 ? COLLX_SPLIT_NOCOLOR : 7;
    ASSERT_EQ(collx_comm_split(comm, color, 0, &sub), COLLX_OK) << collx_last_error(comm);
    if (rank == 1) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int32_t size = 0;
    collx_comm_size(sub, &size);
    EXPECT_EQ(size, 2);
    EXPECT_EQ(collx_barrier(sub, nullptr), COLLX_OK);
    collx_comm_destroy(sub);
  });
}

TEST(CommunicatorDup, DuplicateRunsCollectivesIndependentlyOfTheParent) {
  ThreadRanks world(3);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    collx_comm_t copy = nullptr;
    ASSERT_EQ(collx_comm_dup(comm, &copy), COLLX_OK) << collx_last_error(comm);
    int32_t r = -1;
    collx_comm_rank(copy, &r);
    EXPECT_EQ(r, rank);
    double a = rank, b = 10.0 * rank, sa = 0, sb = 0;
    EXPECT_EQ(collx_allreduce(&a, &sa, 1, COLLX_FLOAT64, COLLX_SUM, copy, nullptr), COLLX_OK);
    EXPECT_EQ(collx_allreduce(&b, &sb, 1, COLLX_FLOAT64, COLLX_SUM, comm, nullptr), COLLX_OK);
    EXPECT_EQ(sa, 3.0);
    EXPECT_EQ(sb, 30.0);
    collx_comm_destroy(copy);
  });
}

TEST(Barrier, NoRankLeavesBeforeTheLastOneEnters) {
  for (int size : {1, 2, 3, 5, 8}) {
    ThreadRanks world(size);
    ASSERT_TRUE(world.ok()) << world.error();
    std::atomic<int> entered{0};
    world.run([&](int rank, collx_comm_t comm) {
      // The last rank arrives late; nobody may pass the barrier before it entered.
      if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      entered.fetch_add(1);
      ASSERT_EQ(collx_barrier(comm, nullptr), COLLX_OK) << collx_last_error(comm);
      EXPECT_EQ(entered.load(), size) << "rank " << rank << " left the barrier early";
    });
  }
}

TEST(PointToPoint, MessagesWithOneTagArriveInOrderAndTagsDoNotMix) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    if (rank == 0) {
      for (int32_t i = 0; i < 20; ++i) {
        ASSERT_EQ(collx_send(&i, 1, COLLX_INT32, 1, /*tag=*/5, comm, nullptr), COLLX_OK) << collx_last_error(comm);
        int32_t other = 1000 + i;
        ASSERT_EQ(collx_send(&other, 1, COLLX_INT32, 1, /*tag=*/6, comm, nullptr), COLLX_OK);
      }
      ASSERT_EQ(collx_send(nullptr, 0, COLLX_INT32, 1, 7, comm, nullptr), COLLX_OK);
    } else {
      // Tag 6 first: its messages were interleaved with tag 5's on the wire.
      for (int32_t i = 0; i < 20; ++i) {
        int32_t got = -1;
        ASSERT_EQ(collx_recv(&got, 1, COLLX_INT32, 0, 6, comm, nullptr), COLLX_OK) << collx_last_error(comm);
        EXPECT_EQ(got, 1000 + i);
      }
      for (int32_t i = 0; i < 20; ++i) {
        int32_t got = -1;
        ASSERT_EQ(collx_recv(&got, 1, COLLX_INT32, 0, 5, comm, nullptr), COLLX_OK);
        EXPECT_EQ(got, i);
      }
      EXPECT_EQ(collx_recv(nullptr, 0, COLLX_INT32, 0, 7, comm, nullptr), COLLX_OK);
    }
  });
}

TEST(PointToPoint, NonblockingExchangeOfLargeBuffersBothWaysCompletes) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  const size_t count = (size_t{8} << 20) + 5;  // 32 MiB of floats each way
  world.run([&](int rank, collx_comm_t comm) {
    std::vector<float> out(count), in(count, -1.0f);
    for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>((i * 3 + static_cast<size_t>(rank)) % 1000);
    const int peer = 1 - rank;
    collx_request_t send = nullptr, recv = nullptr;
    ASSERT_EQ(collx_isend(out.data(), count, COLLX_FLOAT32, peer, 1, comm, nullptr, &send), COLLX_OK);
    ASSERT_EQ(collx_irecv(in.data(), count, COLLX_FLOAT32, peer, 1, comm, nullptr, &recv), COLLX_OK);
    EXPECT_EQ(collx_wait(recv, -1), COLLX_OK) << collx_last_error(comm);
    EXPECT_EQ(collx_wait(send, -1), COLLX_OK) << collx_last_error(comm);
    collx_request_free(send);
    collx_request_free(recv);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += in[i] != static_cast<float>((i * 3 + static_cast<size_t>(peer)) % 1000);
    EXPECT_EQ(wrong, 0u);
  });
}

TEST(Nonblocking, CollectivesCompleteInCallOrderWithBlockingOnesInterleaved) {
  ThreadRanks world(4);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const size_t count = 100000;
    std::vector<std::vector<int64_t>> in(3, std::vector<int64_t>(count)), out(3, std::vector<int64_t>(count, -1));
    std::vector<collx_request_t> reqs(3, nullptr);
    for (int k = 0; k < 3; ++k) {
      for (size_t i = 0; i < count; ++i) in[k][i] = static_cast<int64_t>((k + 1) * rank + i);
      ASSERT_EQ(collx_iallreduce(in[k].data(), out[k].data(), count, COLLX_INT64, COLLX_SUM, comm, nullptr, &reqs[k]),
                COLLX_OK);
    }
    int64_t one = 1, total = 0;
    ASSERT_EQ(collx_allreduce(&one, &total, 1, COLLX_INT64, COLLX_SUM, comm, nullptr), COLLX_OK) << collx_last_error(comm);
    EXPECT_EQ(total, 4);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(collx_wait(reqs[k], -1), COLLX_OK) << collx_last_error(comm);
      int done = 0;
      EXPECT_EQ(collx_test(reqs[k], &done), COLLX_OK);
      EXPECT_EQ(done, 1);
      collx_request_free(reqs[k]);
      // sum over ranks of (k+1)*r + i = (k+1)*6 + 4*i
      for (size_t i = 0; i < count; i += 997) EXPECT_EQ(out[k][i], (k + 1) * 6 + 4 * static_cast<int64_t>(i));
    }
  });
}

TEST(Nonblocking, WaitWithShortTimeoutReportsInProgressAndLaterCompletes) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    float x = 1.0f, y = 0.0f;
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    collx_request_t req = nullptr;
    ASSERT_EQ(collx_iallreduce(&x, &y, 1, COLLX_FLOAT32, COLLX_SUM, comm, nullptr, &req), COLLX_OK);
    if (rank == 0) {
      int done = 1;
      EXPECT_EQ(collx_test(req, &done), COLLX_OK);
      EXPECT_EQ(done, 0);
      EXPECT_EQ(collx_wait(req, 20), COLLX_IN_PROGRESS);
    }
    EXPECT_EQ(collx_wait(req, -1), COLLX_OK) << collx_last_error(comm);
    EXPECT_EQ(y, 2.0f);
    collx_request_free(req);
  });
}

TEST(OpsAndOptions, PremulSumScalesEachInputAndAvgDividesBySize) {
  ThreadRanks world(3);
  ASSERT_TRUE(world.ok()) << world.error();
  CollCase premul;
  premul.count = 1000;
  premul.op = COLLX_PREMUL_SUM;
  premul.premul = 0.5;
  premul.datatype = COLLX_FLOAT64;
  EXPECT_EQ(run_and_check(world, premul), 0u);
  CollCase avg = premul;
  avg.op = COLLX_AVG;
  avg.datatype = COLLX_INT32;
  EXPECT_EQ(run_and_check(world, avg), 0u);
}

}  // namespace
}  // namespace testing
}  // namespace collx

namespace collx {
namespace testing {
namespace {

TEST(PointToPoint, PollingWithTestAloneCompletesAReceive) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    std::vector<int32_t> buf(100000, rank);
    collx_request_t req = nullptr;
    if (rank == 0) {
      ASSERT_EQ(collx_isend(buf.data(), buf.size(), COLLX_INT32, 1, 9, comm, nullptr, &req), COLLX_OK);
    } else {
      ASSERT_EQ(collx_irecv(buf.data(), buf.size(), COLLX_INT32, 0, 9, comm, nullptr, &req), COLLX_OK);
    }
    // Only collx_test, no wait: MPI_Test-style polling must drive the transport itself.
    int done = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done && std::chrono::steady_clock::now() < give_up) {
      ASSERT_EQ(collx_test(req, &done), COLLX_OK) << collx_last_error(comm);
      if (!done) std::this_thread::yield();
    }
    EXPECT_EQ(done, 1) << "rank " << rank << ": collx_test never completed the request";
    collx_request_free(req);
    if (rank == 1) EXPECT_EQ(buf[99999], 0);
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
