// The shm transport with ranks as threads of this process (same pid: rendezvous pulls from
// our own address space; force_ring_copy exercises the chunked fallback).
#include <gtest/gtest.h>
#include <time.h>

#include "transports/shm/shm_test_util.h"

namespace collx {
namespace shm_test {
namespace {

using TransportPtr = std::unique_ptr<transport::Transport>;

// Creates `size` transports (concurrently: creation allgathers) and runs fn(rank, t).
void run_job(int size, const std::function<void(ShmTransportParams&)>& tweak,
             const std::function<void(int, transport::Transport*)>& fn, uint64_t* comm_out = nullptr) {
  auto board = std::make_shared<Board>(size);
  const uint64_t comm = next_comm_id();
  if (comm_out) *comm_out = comm;
  std::vector<TransportPtr> ts(size);
  std::vector<std::unique_ptr<BoardBootstrap>> boots;
  for (int r = 0; r < size; ++r) boots.push_back(std::make_unique<BoardBootstrap>(board, r));
  std::vector<std::thread> threads;
  std::vector<Status> st(size);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      ShmTransportParams p = make_params(r, size, comm, boots[r].get());
      if (tweak) tweak(p);
      st[r] = create_shm_transport(p, &ts[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) ASSERT_TRUE(st[r].ok()) << st[r].message();
  threads.clear();
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r, ts[r].get()); });
  for (auto& t : threads) t.join();
}

OpDesc p2p() { return OpDesc{}; }

const std::vector<size_t> kSizes = {0, 1, 1000, (64u << 10) + 1, (1u << 20) + 3, 64u << 20};

void sizes_test(bool force_ring) {
  run_job(2, [&](ShmTransportParams& p) { p.force_ring_copy = force_ring; },
          [](int rank, transport::Transport* t) {
            for (size_t i = 0; i < kSizes.size(); ++i) {
              std::vector<uint8_t> buf(kSizes[i]);
              Request req;
              if (rank == 0) {
                fill(buf, i);
                ASSERT_TRUE(t->post_send(&req, 1, 7, buf.data(), buf.size(), p2p()).ok());
              } else {
                ASSERT_TRUE(t->post_recv(&req, 0, 7, buf.data(), buf.size(), p2p()).ok());
              }
              Status s = wait_one(t, &req);
              ASSERT_TRUE(s.ok()) << s.message();
              if (rank == 1) {
                EXPECT_EQ(first_bad(buf, i), -1) << "size " << kSizes[i];
              }
            }
            t->close(Deadline::after_ms(5000));
          });
}

TEST(ShmThreads, SizesSameProcessPull) { sizes_test(false); }
TEST(ShmThreads, SizesRingFallback) { sizes_test(true); }

TEST(ShmThreads, NoSegmentLeftInDevShm) {
  uint64_t comm = 0;
  run_job(3, nullptr, [&](int, transport::Transport* t) {
    EXPECT_TRUE(shm_leftovers(comm).empty());
    t->close(Deadline::after_ms(2000));
  }, &comm);
  EXPECT_TRUE(shm_leftovers(comm).empty());
}

// Messages on one (peer, tag) arrive in send order; tags are independent; the receiver
// posts late, so many are unexpected (some rendezvous, some eager).
TEST(ShmThreads, OrderingPerTagAndUnexpected) {
  constexpr int kN = 40;
  run_job(2, nullptr, [](int rank, transport::Transport* t) {
    auto size_of = [](int i) { return static_cast<size_t>(i % 3 == 0 ? 100000 + i : 50 + i * 37); };
    std::vector<std::vector<uint8_t>> bufs(2 * kN);
    std::vector<Request> reqs(2 * kN);
    std::vector<Request*> ptrs;
    if (rank == 0) {
      for (int i = 0; i < kN; ++i) {
        for (int tag = 0; tag < 2; ++tag) {
          auto& b = bufs[tag * kN + i];
          b.resize(size_of(i));
          fill(b, tag * 1000 + i);
          ASSERT_TRUE(t->post_send(&reqs[tag * kN + i], 1, 100 + tag, b.data(), b.size(), p2p()).ok());
          ptrs.push_back(&reqs[tag * kN + i]);
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let eager ones land unexpected
      for (int tag = 1; tag >= 0; --tag) {
        for (int i = 0; i < kN; ++i) {
          auto& b = bufs[tag * kN + i];
          b.resize(size_of(i));
          ASSERT_TRUE(t->post_recv(&reqs[tag * kN + i], 0, 100 + tag, b.data(), b.size(), p2p()).ok());
          ptrs.push_back(&reqs[tag * kN + i]);
        }
      }
    }
    Status s = t->wait_all(ptrs.data(), ptrs.size(), Deadline::after_ms(20000));
    ASSERT_TRUE(s.ok()) << s.message();
    if (rank == 1) {
      for (int tag = 0; tag < 2; ++tag) {
        for (int i = 0; i < kN; ++i) EXPECT_EQ(first_bad(bufs[tag * kN + i], tag * 1000 + i), -1) << tag << "/" << i;
      }
    }
    t->close(Deadline::after_ms(5000));
  });
}

// A budget smaller than what is sent unexpected: the ring holds the rest back, nothing lost.
TEST(ShmThreads, UnexpectedBudgetPausesWithoutLoss) {
  constexpr int kN = 30;
  run_job(2, [](ShmTransportParams& p) { p.unexpected_max_bytes = 20000; }, [](int rank, transport::Transport* t) {
    std::vector<std::vector<uint8_t>> bufs(kN, std::vector<uint8_t>(6000));
    std::vector<Request> reqs(kN);
    std::vector<Request*> ptrs;
    for (int i = 0; i < kN; ++i) {
      if (rank == 0) {
        fill(bufs[i], i);
        ASSERT_TRUE(t->post_send(&reqs[i], 1, 1, bufs[i].data(), 6000, p2p()).ok());
      }
      ptrs.push_back(&reqs[i]);
    }
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (int i = 0; i < kN; ++i) ASSERT_TRUE(t->post_recv(&reqs[i], 0, 1, bufs[i].data(), 6000, p2p()).ok());
    }
    Status s = t->wait_all(ptrs.data(), ptrs.size(), Deadline::after_ms(20000));
    ASSERT_TRUE(s.ok()) << s.message();
    if (rank == 1) {
      for (int i = 0; i < kN; ++i) EXPECT_EQ(first_bad(bufs[i], i), -1) << i;
    }
    t->close(Deadline::after_ms(5000));
  });
}

TEST(ShmThreads, SizeAndOpMismatch) {
  for (size_t bytes : {size_t{100}, size_t{200000}}) {
    run_job(2, nullptr, [&](int rank, transport::Transport* t) {
      std::vector<uint8_t> buf(bytes + 8);
      Request req;
      OpDesc d;
      d.kind = 1;
      d.count = bytes;
      d.seq = 3;
      if (rank == 0) {
        ASSERT_TRUE(t->post_send(&req, 1, 9, buf.data(), bytes, d).ok());
        Status s = wait_one(t, &req, 5000);  // eager: done once in the ring; rendezvous: fails
        if (s.ok()) {
          Request never;
          ASSERT_TRUE(t->post_recv(&never, 1, 10, buf.data(), 1, d).ok());
          s = wait_one(t, &never, 5000);
        }
        EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();  // rank 1 poisoned and told us
        EXPECT_NE(s.message().find("rank 1 failed"), std::string::npos) << s.message();
      } else {
        OpDesc mine = d;
        mine.count = bytes + 8;
        ASSERT_TRUE(t->post_recv(&req, 0, 9, buf.data(), bytes + 8, mine).ok());
        Status s = wait_one(t, &req, 5000);
        EXPECT_EQ(s.code(), COLLX_ERR_MISMATCH) << s.message();
        EXPECT_NE(s.message().find(describe_op(d)), std::string::npos) << s.message();
        EXPECT_NE(s.message().find(describe_op(mine)), std::string::npos) << s.message();
        EXPECT_EQ(t->health().code(), COLLX_ERR_MISMATCH);
      }
    });
  }
}

TEST(ShmThreads, ActiveOpMismatchBeforeReceivePosted) {
  run_job(2, nullptr, [](int rank, transport::Transport* t) {
    OpDesc theirs;
    theirs.kind = 1;
    theirs.seq = 5;
    theirs.count = 10;
    Request req;
    uint8_t buf[16] = {};
    if (rank == 0) {
      ASSERT_TRUE(t->post_send(&req, 1, transport::coll_tag(5, 0), buf, 16, theirs).ok());
      (void)wait_one(t, &req, 3000);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    OpDesc active = theirs;
    active.kind = 2;  // we run a broadcast, they an allreduce
    t->set_active_op(&active);
    Request other;
    ASSERT_TRUE(t->post_recv(&other, 0, transport::coll_tag(5, 1), buf, 16, active).ok());
    Status s = wait_one(t, &other, 3000);
    EXPECT_EQ(s.code(), COLLX_ERR_MISMATCH) << s.message();
    EXPECT_NE(s.message().find(describe_op(theirs)), std::string::npos) << s.message();
    t->set_active_op(nullptr);
  });
}

TEST(ShmThreads, TimeoutNamesPendingPeer) {
  run_job(3, nullptr, [](int rank, transport::Transport* t) {
    if (rank != 0) return;
    uint8_t buf[4];
    Request a, b;
    ASSERT_TRUE(t->post_recv(&a, 2, 1, buf, 4, p2p()).ok());
    ASSERT_TRUE(t->post_send(&b, 1, 1, nullptr, 0, p2p()).ok());  // eager: completes at once
    Request* reqs[] = {&a, &b};
    auto t0 = std::chrono::steady_clock::now();
    Status s = t->wait_all(reqs, 2, Deadline::after_ms(200));
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT) << s.message();
    EXPECT_NE(s.message().find("recv from rank 2"), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find("rank 1"), std::string::npos) << s.message();
    EXPECT_GE(ms, 190);
    EXPECT_LT(ms, 1000);
    t->cancel(reqs, 2);
    EXPECT_TRUE(a.failed());
  });
}

TEST(ShmThreads, AbortFromAnotherThreadWakesWaiter) {
  run_job(2, nullptr, [](int rank, transport::Transport* t) {
    if (rank == 1) {
      Request r;
      uint8_t buf[4];
      ASSERT_TRUE(t->post_recv(&r, 0, 1, buf, 4, p2p()).ok());
      Status s = wait_one(t, &r, 5000);  // rank 0's abort reaches us as a failure
      EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
      EXPECT_NE(s.message().find("rank 0 aborted"), std::string::npos) << s.message();
      return;
    }
    Request r;
    uint8_t buf[4];
    ASSERT_TRUE(t->post_recv(&r, 1, 1, buf, 4, p2p()).ok());
    std::thread aborter([t] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      t->abort();
    });
    auto t0 = std::chrono::steady_clock::now();
    Status s = wait_one(t, &r, 10000);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    aborter.join();
    EXPECT_EQ(s.code(), COLLX_ERR_ABORTED) << s.message();
    EXPECT_LT(ms, 300 + 100);
    EXPECT_EQ(t->health().code(), COLLX_ERR_ABORTED);
  });
}

TEST(ShmThreads, CloseIsReportedAsLeftAfterDelivery) {
  run_job(2, nullptr, [](int rank, transport::Transport* t) {
    uint8_t buf[100];
    if (rank == 1) {
      std::memset(buf, 0x5a, sizeof buf);
      Request r;
      ASSERT_TRUE(t->post_send(&r, 0, 3, buf, sizeof buf, p2p()).ok());
      ASSERT_TRUE(wait_one(t, &r).ok());
      t->close(Deadline::after_ms(2000));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 1 has left by now
    Request a, b;
    ASSERT_TRUE(t->post_recv(&a, 1, 3, buf, sizeof buf, p2p()).ok());
    ASSERT_TRUE(wait_one(t, &a, 5000).ok());  // sent before leaving: still delivered
    EXPECT_EQ(buf[99], 0x5a);
    Status s = t->post_recv(&b, 1, 3, buf, sizeof buf, p2p());
    if (s.ok()) s = wait_one(t, &b, 5000);
    EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
    EXPECT_NE(s.message().find("rank 1 left"), std::string::npos) << s.message();
  });
}

TEST(ShmThreads, PoisonNotifiesPeers) {
  run_job(3, nullptr, [](int rank, transport::Transport* t) {
    if (rank == 2) {
      t->poison(make_status(COLLX_ERR_INTERNAL, "disk on fire"), true);
      return;
    }
    Request r;
    uint8_t buf[4];
    ASSERT_TRUE(t->post_recv(&r, 2, 1, buf, 4, p2p()).ok());
    Status s = wait_one(t, &r, 5000);
    EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
    EXPECT_NE(s.message().find("rank 2 failed"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("disk on fire"), std::string::npos) << s.message();
  });
}

TEST(ShmThreads, CancelPostedReceiveThenReuse) {
  run_job(2, nullptr, [](int rank, transport::Transport* t) {
    uint32_t v = 0;
    Request r;
    if (rank == 0) {
      ASSERT_TRUE(t->post_recv(&r, 1, 4, &v, 4, p2p()).ok());
      Request* reqs[] = {&r};
      t->cancel(reqs, 1);
      ASSERT_TRUE(r.failed());
      EXPECT_TRUE(t->health().ok());
      ASSERT_TRUE(t->post_recv(&r, 1, 4, &v, 4, p2p()).ok());
      ASSERT_TRUE(wait_one(t, &r).ok());
      EXPECT_EQ(v, 77u);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      v = 77;
      ASSERT_TRUE(t->post_send(&r, 0, 4, &v, 4, p2p()).ok());
      ASSERT_TRUE(wait_one(t, &r).ok());
    }
    t->close(Deadline::after_ms(2000));
  });
}

// 8 ranks, every pair both ways, mixed sizes (eager, several cells, rendezvous), 2 cores.
TEST(ShmThreads, AllToAllStress8Ranks) {
  constexpr int kRanks = 8, kRounds = 6;
  run_job(kRanks, nullptr, [](int rank, transport::Transport* t) {
    for (int round = 0; round < kRounds; ++round) {
      auto size_for = [&](int src, int dst) {
        static const size_t s[] = {0, 7, 4000, 10000, 70000, 300000};
        return s[(src * 3 + dst + round) % 6];
      };
      std::vector<std::vector<uint8_t>> out(kRanks), in(kRanks);
      std::vector<Request> sreq(kRanks), rreq(kRanks);
      std::vector<Request*> ptrs;
      for (int p = 0; p < kRanks; ++p) {
        if (p == rank) continue;
        in[p].resize(size_for(p, rank));
        ASSERT_TRUE(t->post_recv(&rreq[p], p, round, in[p].data(), in[p].size(), p2p()).ok());
        ptrs.push_back(&rreq[p]);
      }
      for (int k = 1; k < kRanks; ++k) {
        int p = (rank + k) % kRanks;
        out[p].resize(size_for(rank, p));
        fill(out[p], rank * 100 + p + round * 10000);
        ASSERT_TRUE(t->post_send(&sreq[p], p, round, out[p].data(), out[p].size(), p2p()).ok());
        ptrs.push_back(&sreq[p]);
      }
      Status s = t->wait_all(ptrs.data(), ptrs.size(), Deadline::after_ms(30000));
      ASSERT_TRUE(s.ok()) << s.message();
      for (int p = 0; p < kRanks; ++p) {
        if (p != rank) {
          EXPECT_EQ(first_bad(in[p], p * 100 + rank + round * 10000), -1) << p << "->" << rank;
        }
      }
    }
    t->close(Deadline::after_ms(5000));
  });
}

double thread_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

TEST(ShmThreads, IdleWaitUsesNoCpu) {
  run_job(2, nullptr, [](int rank, transport::Transport* t) {
    Request r;
    uint8_t buf[4];
    if (rank == 0) {
      ASSERT_TRUE(t->post_recv(&r, 1, 1, buf, 4, p2p()).ok());
      double c0 = thread_cpu_ms();
      Status s = wait_one(t, &r, 1000);
      double used = thread_cpu_ms() - c0;
      EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT);
      EXPECT_LT(used, 50.0) << "CPU ms spent waiting 1 s for nothing";
      Request* reqs[] = {&r};
      t->cancel(reqs, 1);
    }
  });
}

// Two threads of rank 0 wait at once (leader/follower), each for a different peer.
TEST(ShmThreads, SeveralWaitingThreads) {
  run_job(3, nullptr, [](int rank, transport::Transport* t) {
    if (rank != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(rank * 100));
      std::vector<uint8_t> b(rank == 1 ? 10 : 300000);
      fill(b, rank);
      Request r;
      ASSERT_TRUE(t->post_send(&r, 0, 1, b.data(), b.size(), p2p()).ok());
      Status s = wait_one(t, &r);
      ASSERT_TRUE(s.ok()) << s.message();
      return;
    }
    std::vector<std::thread> waiters;
    for (int peer = 1; peer <= 2; ++peer) {
      waiters.emplace_back([t, peer] {
        std::vector<uint8_t> b(peer == 1 ? 10 : 300000);
        Request r;
        ASSERT_TRUE(t->post_recv(&r, peer, 1, b.data(), b.size(), p2p()).ok());
        auto t0 = std::chrono::steady_clock::now();
        Status s = wait_one(t, &r, 5000);
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(first_bad(b, peer), -1);
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
        EXPECT_LT(ms, peer * 100 + 150) << "peer " << peer;
      });
    }
    for (auto& w : waiters) w.join();
  });
}

}  // namespace
}  // namespace shm_test
}  // namespace collx
