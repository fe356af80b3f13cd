// Bad input gets COLLX_ERR_INVALID_ARG naming the argument and leaves the communicator
// usable; mismatched calls, timeouts and aborts fail every rank involved, fast, with a
// message that says what happened.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string last_error(collx_comm_t comm) { return collx_last_error(comm); }

// Every rank still completes a correct all-reduce afterwards.
void expect_usable(ThreadRanks& world) {
  world.run([&](int rank, collx_comm_t comm) {
    int32_t x = rank + 1, sum = 0;
    ASSERT_EQ(collx_allreduce(&x, &sum, 1, COLLX_INT32, COLLX_SUM, comm, nullptr), COLLX_OK) << last_error(comm);
    EXPECT_EQ(sum, world.size() * (world.size() + 1) / 2);
  });
}

// What each rank's call returned, its message, and how long the slowest rank took.
struct EveryRank {
  std::vector<collx_status_t> rc;
  std::vector<std::string> msg;
  double seconds = 0;
};
EveryRank call_on_every_rank(ThreadRanks& world, const std::function<collx_status_t(int, collx_comm_t)>& call) {
  EveryRank out;
  out.rc.assign(static_cast<size_t>(world.size()), COLLX_OK);
  out.msg.assign(static_cast<size_t>(world.size()), "");
  const auto start = Clock::now();
  world.run([&](int rank, collx_comm_t comm) {
    out.rc[rank] = call(rank, comm);
    out.msg[rank] = last_error(comm);
  });
  out.seconds = seconds_since(start);
  return out;
}

TEST(BadInput, NullCommunicatorIsRejectedWithAMessage) {
  float x = 0;
  EXPECT_EQ(collx_allreduce(&x, &x, 1, COLLX_FLOAT32, COLLX_SUM, nullptr, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("comm"), std::string::npos) << collx_last_error(nullptr);
  collx_comm_t out = nullptr;
  EXPECT_EQ(collx_comm_create(nullptr, &out), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(out, nullptr);
}

TEST(BadInput, EachBadArgumentIsNamedAndTheCommunicatorStaysUsable) {
  ThreadRanks world(2);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_comm_t comm = world.comm(0);
  std::vector<float> buf(64, 1.0f);
  struct Case {
    const char* what;
    std::function<collx_status_t()> call;
    const char* must_mention;
  };
  const std::vector<Case> cases = {
      {"null sendbuf", [&] { return collx_allreduce(nullptr, buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "sendbuf"},
      {"null recvbuf", [&] { return collx_allgather(buf.data(), nullptr, 4, COLLX_FLOAT32, comm, nullptr); }, "recvbuf"},
      {"unknown datatype", [&] { return collx_allreduce(buf.data(), buf.data(), 4, static_cast<collx_datatype_t>(42), COLLX_SUM, comm, nullptr); }, "datatype"},
      {"unknown op", [&] { return collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, static_cast<collx_op_t>(-3), comm, nullptr); }, "op"},
      {"root out of range", [&] { return collx_broadcast(buf.data(), buf.data(), 4, COLLX_FLOAT32, 2, comm, nullptr); }, "root 2"},
      {"negative root", [&] { return collx_reduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, -1, comm, nullptr); }, "root -1"},
      {"size overflow", [&] { return collx_allgather(buf.data(), buf.data() + 8, SIZE_MAX / 4, COLLX_FLOAT32, comm, nullptr); }, "overflow"},
      {"partial overlap", [&] { return collx_allreduce(buf.data(), buf.data() + 1, 8, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "overlap"},
      {"bad in-place reduce-scatter", [&] { return collx_reduce_scatter(buf.data(), buf.data() + 1, 4, COLLX_FLOAT32, COLLX_SUM, comm, nullptr); }, "in place"},
      {"alltoall in place", [&] { return collx_alltoall(buf.data(), buf.data(), 4, COLLX_FLOAT32, comm, nullptr); }, "in-place"},
      {"gather root out of range", [&] { return collx_gather(buf.data(), buf.data() + 16, 4, COLLX_FLOAT32, 2, comm, nullptr); }, "root 2"},
      {"scatter negative root", [&] { return collx_scatter(buf.data(), buf.data() + 16, 4, COLLX_FLOAT32, -1, comm, nullptr); }, "root -1"},
      {"gather null recvbuf on the root", [&] { return collx_gather(buf.data(), nullptr, 4, COLLX_FLOAT32, 0, comm, nullptr); }, "recvbuf"},
      {"scatter null sendbuf on the root", [&] { return collx_scatter(nullptr, buf.data(), 4, COLLX_FLOAT32, 0, comm, nullptr); }, "sendbuf"},
      {"gather overlap on the root", [&] { return collx_gather(buf.data() + 1, buf.data(), 4, COLLX_FLOAT32, 0, comm, nullptr); }, "in place"},
      {"scatter overlap on the root", [&] { return collx_scatter(buf.data(), buf.data() + 1, 4, COLLX_FLOAT32, 0, comm, nullptr); }, "in place"},
      {"gather size overflow", [&] { return collx_gather(buf.data(), buf.data() + 8, SIZE_MAX / 4, COLLX_FLOAT32, 0, comm, nullptr); }, "overflow"},
      {"peer out of range", [&] { return collx_send(buf.data(), 4, COLLX_FLOAT32, 9, 0, comm, nullptr); }, "peer 9"},
      {"negative tag", [&] { return collx_send(buf.data(), 4, COLLX_FLOAT32, 1, -2, comm, nullptr); }, "tag"},
      {"algorithm without that collective", [&] {
         collx_opts_t opts;
         collx_opts_init(&opts, sizeof opts);
         opts.algorithm = COLLX_ALGO_RECURSIVE_DOUBLING;
         return collx_allgather(buf.data(), buf.data() + 16, 4, COLLX_FLOAT32, comm, &opts);
       }, "recursive_doubling"},
      {"uninitialized options", [&] {
         collx_opts_t opts{};
         return collx_allreduce(buf.data(), buf.data(), 4, COLLX_FLOAT32, COLLX_SUM, comm, &opts);
       }, "collx_opts_init"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(c.call(), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(last_error(comm).find(c.must_mention), std::string::npos) << last_error(comm);
    collx_status_t async_error = COLLX_ERR_INTERNAL;
    collx_comm_get_async_error(comm, &async_error);
    EXPECT_EQ(async_error, COLLX_OK) << "an invalid argument must not poison the communicator";
  }
  expect_usable(world);
}

TEST(BadInput, ZeroCopyAllocationsRejectBadSizesAndForeignOrFreedPointers) {
  void* p = nullptr;
  EXPECT_EQ(collx_mem_alloc(0, &p), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("collx_mem_alloc: bytes is 0"), std::string::npos)
      << collx_last_error(nullptr);
  EXPECT_EQ(collx_mem_alloc(100, nullptr), COLLX_ERR_INVALID_ARG);
  ASSERT_EQ(collx_mem_alloc(100, &p), COLLX_OK);
  std::memset(p, 7, 100);
  int on_stack = 0;
  EXPECT_EQ(collx_mem_free(&on_stack), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(collx_mem_free(p), COLLX_OK);
  EXPECT_EQ(collx_mem_free(p), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("not memory from collx_mem_alloc"), std::string::npos)
      << collx_last_error(nullptr);
  EXPECT_EQ(collx_mem_free(nullptr), COLLX_OK);
}

TEST(Mismatch, DifferentCountsFailBothRanksNamingBothCalls) {
  ThreadRanks world(2, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  const EveryRank out = call_on_every_rank(world, [](int rank, collx_comm_t comm) {
    std::vector<float> buf(16, 1.0f);
    return collx_allreduce(buf.data(), buf.data(), rank == 0 ? 8 : 9, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
  });
  const std::vector<collx_status_t>& rc = out.rc;
  const std::vector<std::string>& msg = out.msg;
  EXPECT_LT(out.seconds, 5.0) << "a mismatch must not wait for the timeout";
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + msg[r]);
    EXPECT_EQ(rc[r], COLLX_ERR_MISMATCH);
    EXPECT_NE(msg[r].find("count 8"), std::string::npos);
    EXPECT_NE(msg[r].find("count 9"), std::string::npos);
  }
}

TEST(Mismatch, DifferentCollectivesAtTheSameStepFailInsteadOfHanging) {
  ThreadRanks world(3, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  const EveryRank out = call_on_every_rank(world, [](int rank, collx_comm_t comm) {
    std::vector<int32_t> buf(32, rank);
    if (rank == 2) return collx_broadcast(buf.data(), buf.data(), 32, COLLX_INT32, 0, comm, nullptr);
    return collx_allreduce(buf.data(), buf.data(), 32, COLLX_INT32, COLLX_SUM, comm, nullptr);
  });
  const std::vector<collx_status_t>& rc = out.rc;
  const std::vector<std::string>& msg = out.msg;
  EXPECT_LT(out.seconds, 5.0);
  bool someone_named_both = false;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + ": " + msg[r]);
    EXPECT_NE(rc[r], COLLX_OK);
    EXPECT_TRUE(rc[r] == COLLX_ERR_MISMATCH || rc[r] == COLLX_ERR_REMOTE) << collx_status_name(rc[r]);
    if (msg[r].find("allreduce") != std::string::npos && msg[r].find("broadcast") != std::string::npos) {
      someone_named_both = true;
    }
  }
  EXPECT_TRUE(someone_named_both);
  // A failed communicator says so on every later call.
  world.run([&](int rank, collx_comm_t comm) {
    int32_t x = 0;
    EXPECT_NE(collx_allreduce(&x, &x, 1, COLLX_INT32, COLLX_SUM, comm, nullptr), COLLX_OK);
    EXPECT_NE(last_error(comm).find("failed earlier"), std::string::npos) << "rank " << rank << ": " << last_error(comm);
  });
}

// The ranks that are not the root send it a message first in gather and in scatter alike,
// so the root compares their calls with its own and nobody waits for the timeout.
TEST(Mismatch, ScatterAgainstGatherOrAnotherCountFailsTheRootInsteadOfWaiting) {
  struct Disagreement {
    const char* what;
    std::function<collx_status_t(int rank, collx_comm_t comm, int32_t* buf)> call;
    const char* root_must_mention;
    // A rank that only sent may have finished before the root looked at its message.
    bool disagreeing_rank_waits;
  };
  const std::vector<Disagreement> disagreements = {
      {"rank 2 scatters", [](int rank, collx_comm_t comm, int32_t* buf) {
         return rank == 2 ? collx_scatter(buf, buf + 16, 4, COLLX_INT32, 0, comm, nullptr)
                          : collx_gather(buf + 16, buf, 4, COLLX_INT32, 0, comm, nullptr);
       }, "scatter", true},
      {"rank 2 gathers 5", [](int rank, collx_comm_t comm, int32_t* buf) {
         return collx_gather(buf + 16, buf, rank == 2 ? 5 : 4, COLLX_INT32, 0, comm, nullptr);
       }, "count 5", false},
  };
  for (const Disagreement& d : disagreements) {
    SCOPED_TRACE(d.what);
    ThreadRanks world(3, /*timeout_ms=*/20000);
    ASSERT_TRUE(world.ok()) << world.error();
    const EveryRank out = call_on_every_rank(world, [&](int rank, collx_comm_t comm) {
      std::vector<int32_t> buf(32, rank);
      return d.call(rank, comm, buf.data());
    });
    EXPECT_LT(out.seconds, 5.0) << "a mismatch must not wait for the timeout";
    EXPECT_EQ(out.rc[0], COLLX_ERR_MISMATCH) << out.msg[0];
    EXPECT_NE(out.msg[0].find(d.root_must_mention), std::string::npos) << out.msg[0];
    if (d.disagreeing_rank_waits) {
      EXPECT_NE(out.rc[2], COLLX_OK) << "rank 2 waited for the root, which failed";
    }
  }
}

TEST(Timeout, NamesTheCollectiveItsSequenceNumberAndTheSilentPeer) {
  ThreadRanks world(2, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_status_t rc = COLLX_OK;
  std::string msg;
  double elapsed = 0;
  world.run([&](int rank, collx_comm_t comm) {
    if (rank == 1) return;  // never joins the all-reduce
    collx_opts_t opts;
    collx_opts_init(&opts, sizeof opts);
    opts.timeout_ms = 300;
    float x = 1;
    auto start = Clock::now();
    rc = collx_allreduce(&x, &x, 1, COLLX_FLOAT32, COLLX_SUM, comm, &opts);
    elapsed = seconds_since(start);
    msg = last_error(comm);
  });
  EXPECT_EQ(rc, COLLX_ERR_TIMEOUT) << msg;
  EXPECT_GE(elapsed, 0.25);
  EXPECT_LT(elapsed, 2.0);
  EXPECT_NE(msg.find("allreduce #1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
}

TEST(Abort, FromAnotherThreadWakesTheWaiterAndPeersLearnOfIt) {
  ThreadRanks world(2, /*timeout_ms=*/30000);
  ASSERT_TRUE(world.ok()) << world.error();
  collx_status_t waiter_rc = COLLX_OK, peer_rc = COLLX_OK;
  double waiter_seconds = 0, peer_seconds = 0;
  std::string peer_msg;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(collx_comm_abort(world.comm(0)), COLLX_OK);
  });
  world.run([&](int rank, collx_comm_t comm) {
    std::vector<float> buf(1 << 16, 1.0f);
    if (rank == 0) {
      auto start = Clock::now();
      waiter_rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
      waiter_seconds = seconds_since(start);
    } else {
      // Rank 1 arrives after the abort: it must learn rank 0 is gone, not wait 30 s.
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      auto start = Clock::now();
      peer_rc = collx_allreduce(buf.data(), buf.data(), buf.size(), COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
      peer_seconds = seconds_since(start);
      peer_msg = last_error(comm);
    }
  });
  aborter.join();
  EXPECT_EQ(waiter_rc, COLLX_ERR_ABORTED);
  EXPECT_LT(waiter_seconds, 1.5);
  EXPECT_EQ(peer_rc, COLLX_ERR_REMOTE) << peer_msg;
  EXPECT_LT(peer_seconds, 2.0);
  EXPECT_NE(peer_msg.find("rank 0"), std::string::npos) << peer_msg;
}

}  // namespace
}  // namespace testing
}  // namespace collx

namespace collx {
namespace testing {
namespace {

TEST(Mismatch, ZeroCountAgainstANonZeroCountIsCaughtNotLeftToTimeOut) {
  ThreadRanks world(3, /*timeout_ms=*/20000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<collx_status_t> rc(3);
  std::vector<std::string> msg(3);
  const auto start = Clock::now();
  world.run([&](int rank, collx_comm_t comm) {
    std::vector<float> buf(8, 1.0f);
    rc[rank] = collx_allreduce(buf.data(), buf.data(), rank == 1 ? 0 : 8, COLLX_FLOAT32, COLLX_SUM, comm, nullptr);
    msg[rank] = last_error(comm);
  });
  EXPECT_LT(seconds_since(start), 5.0);
  bool named = false;
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(rc[r] == COLLX_ERR_MISMATCH || rc[r] == COLLX_ERR_REMOTE) << "rank " << r << ": " << msg[r];
    named = named || (msg[r].find("count 0") != std::string::npos && msg[r].find("count 8") != std::string::npos);
  }
  EXPECT_TRUE(named) << msg[0] << "\n" << msg[1] << "\n" << msg[2];
}

TEST(ZeroCount, EveryCollectiveWithCountZeroSucceedsOnEveryRank) {
  ThreadRanks world(3);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    EXPECT_EQ(collx_allreduce(nullptr, nullptr, 0, COLLX_FLOAT32, COLLX_SUM, comm, nullptr), COLLX_OK) << last_error(comm);
    EXPECT_EQ(collx_reduce_scatter(nullptr, nullptr, 0, COLLX_INT8, COLLX_MAX, comm, nullptr), COLLX_OK);
    EXPECT_EQ(collx_allgather(nullptr, nullptr, 0, COLLX_INT64, comm, nullptr), COLLX_OK);
    EXPECT_EQ(collx_broadcast(nullptr, nullptr, 0, COLLX_FLOAT64, 2, comm, nullptr), COLLX_OK);
    EXPECT_EQ(collx_reduce(nullptr, nullptr, 0, COLLX_BFLOAT16, COLLX_AVG, 1, comm, nullptr), COLLX_OK);
    EXPECT_EQ(collx_alltoall(nullptr, nullptr, 0, COLLX_UINT32, comm, nullptr), COLLX_OK) << "rank " << rank;
  });
}

}  // namespace
}  // namespace testing
}  // namespace collx
