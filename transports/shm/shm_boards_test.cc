// The shm transport's shared boards (transport::SharedBoards): what a rank writes before it
// publishes is what its peers read, waits end by their deadline naming the late rank, a
// peer that publishes for another operation is a mismatch, and poison ends a wait.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transports/shm/shm_memory.h"
#include "transports/shm/shm_test_util.h"

namespace collx {
namespace shm_test {
namespace {

using transport::SharedBoards;
using TransportPtr = std::unique_ptr<transport::Transport>;

void run_job(int size, const std::function<void(int, transport::Transport*)>& fn) {
  transport_test::run_thread_job(
      size,
      [&](int rank, int n, uint64_t comm, transport::Bootstrap* boot, TransportPtr* out) {
        return create_shm_transport(make_params(rank, n, comm, boot), out);
      },
      fn);
}

OpDesc op(uint64_t seq, uint64_t count = 10) {
  OpDesc d;
  d.kind = 1;  // the transport only compares descriptions
  d.count = count;
  d.seq = seq;
  return d;
}

Status wait_for(transport::Transport* t, int peer, SharedBoards::Counter counter, uint64_t value, const OpDesc* desc,
                int64_t timeout_ms) {
  Request req;
  COLLX_RETURN_IF_ERROR(t->shared_boards()->post_wait(&req, peer, counter, value, desc));
  Request* list[] = {&req};
  Status status = t->wait_all(list, 1, Deadline::after_ms(timeout_ms));
  if (!req.done()) t->cancel(list, 1);
  return status;
}

TEST(ShmBoards, WhatARankWroteBeforePublishingIsWhatEveryPeerReads) {
  run_job(4, [](int rank, transport::Transport* t) {
    SharedBoards* boards = t->shared_boards();
    ASSERT_NE(boards, nullptr);
    ASSERT_GE(boards->half_bytes(), 4096u);
    for (uint64_t round = 1; round <= 200; ++round) {
      const int half = static_cast<int>(round & 1);
      const OpDesc desc = op(round);
      if (round > 2) {
        for (int peer = 0; peer < 4; ++peer) {
          if (peer != rank) ASSERT_TRUE(wait_for(t, peer, SharedBoards::kDone, round - 2, nullptr, 10000).ok());
        }
      }
      auto* mine = reinterpret_cast<uint64_t*>(boards->board(rank, half));
      for (int i = 0; i < 512; ++i) mine[i] = round * 1000 + rank * 100 + i % 100;
      boards->publish(SharedBoards::kArrived, round, desc);
      for (int peer = 0; peer < 4; ++peer) {
        if (peer == rank) continue;
        Status s = wait_for(t, peer, SharedBoards::kArrived, round, &desc, 10000);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_TRUE(boards->reached(peer, SharedBoards::kArrived, round, &desc));
        const auto* theirs = reinterpret_cast<const uint64_t*>(boards->board(peer, half));
        for (int i = 0; i < 512; ++i) ASSERT_EQ(theirs[i], round * 1000 + peer * 100 + i % 100);
      }
      boards->publish(SharedBoards::kDone, round, desc);
    }
    t->close(Deadline::after_ms(5000));
  });
}

TEST(ShmBoards, AWaitForALateRankTimesOutNamingIt) {
  run_job(2, [](int rank, transport::Transport* t) {
    if (rank == 0) {
      Status s = wait_for(t, 1, SharedBoards::kArrived, 1, nullptr, 200);
      EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT);
      EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("shared-memory round 1"), std::string::npos) << s.message();
      // A timed-out wait leaves the transport usable: it was only late.
      t->shared_boards()->publish(SharedBoards::kArrived, 1, op(1));
    } else {
      Status s = wait_for(t, 0, SharedBoards::kArrived, 1, nullptr, 10000);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    t->close(Deadline::after_ms(5000));
  });
}

TEST(ShmBoards, APeerThatPublishedForAnotherOperationIsAMismatch) {
  run_job(2, [](int rank, transport::Transport* t) {
    const OpDesc mine = op(7, rank == 0 ? 10 : 11);
    t->shared_boards()->publish(SharedBoards::kArrived, 1, mine);
    Status s = wait_for(t, 1 - rank, SharedBoards::kArrived, 1, &mine, 10000);
    // Both see the difference (or the other's news of it).
    EXPECT_TRUE(s.code() == COLLX_ERR_MISMATCH || s.code() == COLLX_ERR_REMOTE) << s.message();
    EXPECT_FALSE(t->health().ok());
  });
}

TEST(ShmBoards, APeerRunningAnotherCollectiveAtOurStepEndsTheWaitWithAMismatch) {
  // Neither rank will ever publish what the other waits for: each learns from the other's
  // active operation, long before the deadline.
  run_job(2, [](int rank, transport::Transport* t) {
    OpDesc mine = op(3);
    mine.kind = static_cast<uint8_t>(rank == 0 ? 1 : 2);
    t->set_active_op(&mine);
    const auto start = std::chrono::steady_clock::now();
    Status s = wait_for(t, 1 - rank, SharedBoards::kArrived, 1, &mine, 20000);
    EXPECT_TRUE(s.code() == COLLX_ERR_MISMATCH || s.code() == COLLX_ERR_REMOTE) << s.message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    t->set_active_op(nullptr);
  });
}

TEST(ShmBoards, PoisonEndsAWaitAndTheWaitOfThePeer) {
  run_job(2, [](int rank, transport::Transport* t) {
    if (rank == 0) {
      t->poison(make_status(COLLX_ERR_INTERNAL, "test failure on rank 0"), /*notify_peers=*/true);
    }
    Status s = wait_for(t, 1 - rank, SharedBoards::kArrived, 1, nullptr, 10000);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.code(), COLLX_ERR_TIMEOUT) << s.message();
  });
}

TEST(ShmBoards, ACancelledWaitIsForgotten) {
  run_job(2, [](int rank, transport::Transport* t) {
    Request req;
    ASSERT_TRUE(t->shared_boards()->post_wait(&req, 1 - rank, SharedBoards::kReduced, 5, nullptr).ok());
    Request* list[] = {&req};
    t->cancel(list, 1);
    EXPECT_TRUE(req.done());
    EXPECT_EQ(req.status().code(), COLLX_ERR_ABORTED);
    EXPECT_TRUE(t->health().ok());
    EXPECT_EQ(t->shared_boards()->post_wait(&req, 7, SharedBoards::kArrived, 1, nullptr).code(), COLLX_ERR_INVALID_ARG);
    t->close(Deadline::after_ms(5000));
  });
}

TEST(ShmBoards, PeersMapAZeroCopyBufferInPlaceAndCopyAnOrdinaryOne) {
  run_job(3, [](int rank, transport::Transport* t) {
    SharedBoards* boards = t->shared_boards();
    if (!boards->can_read_peers()) GTEST_SKIP() << "no cross-memory attach here";
    constexpr size_t kWords = 20000;
    void* shared = nullptr;
    ASSERT_TRUE(shm::allocate_shared_memory(kWords * 8, &shared, nullptr).ok());
    std::vector<uint64_t> ordinary(kWords);
    auto* words = static_cast<uint64_t*>(shared);
    for (size_t i = 0; i < kWords; ++i) words[i] = ordinary[i] = rank * 1000000ull + i;
    const SharedBoards::BufferNote notes[2] = {boards->describe_buffer(shared, kWords * 8),
                                               boards->describe_buffer(ordinary.data(), kWords * 8)};
    EXPECT_NE(notes[0].region_id, 0u);
    EXPECT_EQ(notes[1].region_id, 0u);
    std::memcpy(boards->board(rank, 1), notes, sizeof notes);
    const OpDesc desc = op(1);
    boards->publish(SharedBoards::kArrived, 1, desc);
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == rank) continue;
      ASSERT_TRUE(wait_for(t, peer, SharedBoards::kArrived, 1, &desc, 10000).ok());
      SharedBoards::BufferNote theirs[2];
      std::memcpy(theirs, boards->board(peer, 1), sizeof theirs);
      const uint64_t at = theirs[0].address + 100 * 8;
      const uint8_t* mapped = boards->map_peer(peer, theirs[0], at, 500 * 8);
      ASSERT_NE(mapped, nullptr);
      uint64_t first = 0;
      std::memcpy(&first, mapped, 8);
      EXPECT_EQ(first, peer * 1000000ull + 100);
      EXPECT_EQ(boards->map_peer(peer, theirs[0], at, 500 * 8), mapped) << "the mapping is cached";
      EXPECT_EQ(boards->map_peer(peer, theirs[0], theirs[0].address + kWords * 8, 4096 * 4), nullptr)
          << "past the region's end";
      EXPECT_EQ(boards->map_peer(peer, theirs[1], theirs[1].address, 8), nullptr) << "ordinary memory";
      uint64_t copied = 0;
      ASSERT_TRUE(boards->read_peer(peer, theirs[1].address + 8 * 7, &copied, 8).ok());
      EXPECT_EQ(copied, peer * 1000000ull + 7);
    }
    boards->publish(SharedBoards::kDone, 1, desc);
    for (int peer = 0; peer < 3; ++peer) {
      if (peer != rank) ASSERT_TRUE(wait_for(t, peer, SharedBoards::kDone, 1, &desc, 10000).ok());
    }
    EXPECT_TRUE(shm::free_shared_memory(shared).ok());
    t->close(Deadline::after_ms(5000));
  });
}

}  // namespace
}  // namespace shm_test
}  // namespace collx
