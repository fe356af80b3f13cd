// The shm transport with ranks as threads of this process (same pid: rendezvous pulls from
// our own address space; force_ring_copy exercises the chunked fallback): ring fallback,
// /dev/shm cleanup, budget pausing, abort seen by the peer, an 8-rank stress, idle CPU.
// What every transport does (sizes, ordering, mismatches, cancel, timeouts, poison, close,
// several waiters) is in transports/conformance.
#include <gtest/gtest.h>
#include <time.h>

#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_test_util.h"

namespace collx {
namespace shm_test {
namespace {

using TransportPtr = std::unique_ptr<transport::Transport>;

// Creates `size` transports (tweak adjusts their params) and runs fn(rank, t) in threads.
void run_job(int size, const std::function<void(ShmTransportParams&)>& tweak,
             const std::function<void(int, transport::Transport*)>& fn, uint64_t* comm_out = nullptr) {
  transport_test::run_thread_job(
      size,
      [&](int rank, int n, uint64_t comm, transport::Bootstrap* boot, TransportPtr* out) {
        ShmTransportParams p = make_params(rank, n, comm, boot);
        if (tweak) tweak(p);
        return create_shm_transport(p, out);
      },
      fn, comm_out);
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

TEST(ShmThreads, SizesRingFallback) { sizes_test(true); }

TEST(ShmThreads, NoSegmentLeftInDevShm) {
  uint64_t comm = 0;
  run_job(3, nullptr, [&](int, transport::Transport* t) {
    EXPECT_TRUE(shm_leftovers(comm).empty());
    t->close(Deadline::after_ms(2000));
  }, &comm);
  EXPECT_TRUE(shm_leftovers(comm).empty());
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

}  // namespace
}  // namespace shm_test
}  // namespace collx
