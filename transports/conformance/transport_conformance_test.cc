// The behaviours every transport must have, written once and run over tcp, shm and ucx (when
// built). Transport-specific behaviour (striping, ring fallback, budget pausing, UCX peer
// error modes, ...) is tested beside each transport.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "transports/conformance/conformance_harness.h"

namespace collx {
namespace conformance {
namespace {

class TransportConformance : public ::testing::TestWithParam<Flavor> {
 protected:
  void run(int size, const std::function<void(int, transport::Transport*)>& fn) { run_job(GetParam(), size, fn); }
};

// Eager, several-cell, rendezvous and striped sizes, odd ones included; the direction
// alternates with the size, so both directions are covered without doubling the bytes.
TEST_P(TransportConformance, SizesZeroTo64MiB) {
  const std::vector<size_t> sizes = {0, 1, 7, 1000, (64u << 10) + 1, (1u << 20) + 3, 64u << 20};
  run(2, [&](int rank, transport::Transport* t) {
    const int peer = 1 - rank;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const bool sending = static_cast<int>(i % 2) == rank;
      std::vector<uint8_t> buf(sizes[i], 0xAB);
      Request req;
      if (sending) {
        fill(buf, i);
        ASSERT_TRUE(t->post_send(&req, peer, i, buf.data(), buf.size(), p2p()).ok());
      } else {
        ASSERT_TRUE(t->post_recv(&req, peer, i, buf.data(), buf.size(), p2p()).ok());
      }
      Status s = wait_one(t, &req);
      ASSERT_TRUE(s.ok()) << s.message();
      if (!sending) {
        EXPECT_EQ(first_bad(buf, i), -1) << "size " << sizes[i];
      }
    }
    t->close(Deadline::after_ms(5000));
  });
}

// Messages on one (peer, tag) arrive in send order; tags are independent; the receiver
// posts late and tag by tag in reverse, so many arrive unexpected (eager and rendezvous).
TEST_P(TransportConformance, OrderingPerTagWithUnexpected) {
  constexpr int kN = 40;
  run(2, [](int rank, transport::Transport* t) {
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

// A receive whose message differs in size or OpDesc fails with COLLX_ERR_MISMATCH naming
// both sides, poisons the receiver (which tells the sender), and never writes its buffer.
void mismatch_case(const Flavor& flavor, size_t sent_bytes, size_t recv_bytes, const OpDesc& sent,
                   const OpDesc& posted) {
  run_job(flavor, 2, [&](int rank, transport::Transport* t) {
    std::vector<uint8_t> buf(std::max(sent_bytes, recv_bytes), 0xEE);
    Request req;
    if (rank == 0) {
      ASSERT_TRUE(t->post_send(&req, 1, transport::coll_tag(sent.seq, 0), buf.data(), sent_bytes, sent).ok());
      Status s = wait_one(t, &req, 5000);  // an eager send may complete before the check
      if (s.ok()) {
        // Waits for rank 1's news; the post itself fails when the news already arrived.
        Request never;
        s = t->post_recv(&never, 1, 10, buf.data(), 1, p2p());
        if (s.ok()) s = wait_one(t, &never, 5000);
      }
      EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();  // rank 1 poisoned and told us
      EXPECT_TRUE(contains(s, "rank 1 failed")) << s.message();
      return;
    }
    ASSERT_TRUE(t->post_recv(&req, 0, transport::coll_tag(posted.seq, 0), buf.data(), recv_bytes, posted).ok());
    Status s = wait_one(t, &req, 5000);
    EXPECT_EQ(s.code(), COLLX_ERR_MISMATCH) << s.message();
    EXPECT_TRUE(contains(s, "rank 0")) << s.message();
    if (sent_bytes != recv_bytes) {
      EXPECT_TRUE(contains(s, std::to_string(sent_bytes))) << s.message();
      EXPECT_TRUE(contains(s, std::to_string(recv_bytes))) << s.message();
    } else {
      EXPECT_TRUE(contains(s, describe_op(sent))) << s.message();
      EXPECT_TRUE(contains(s, describe_op(posted))) << s.message();
    }
    EXPECT_EQ(t->health().code(), COLLX_ERR_MISMATCH);
    for (size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xEE) << "byte " << i << " was written";
  });
}

OpDesc allreduce(uint64_t count) {
  OpDesc d;
  d.kind = 1;
  d.count = count;
  d.seq = 3;
  return d;
}

TEST_P(TransportConformance, SizeMismatchBeforeBufferTouched) {
  for (size_t bytes : {size_t{100}, size_t{200000}}) {
    SCOPED_TRACE(bytes);
    mismatch_case(GetParam(), bytes, bytes + 8, allreduce(64), allreduce(64));
  }
}

TEST_P(TransportConformance, OpDescMismatchBeforeBufferTouched) {
  OpDesc broadcast = allreduce(64);
  broadcast.kind = 2;
  for (size_t bytes : {size_t{100}, size_t{200000}}) {
    SCOPED_TRACE(bytes);
    mismatch_case(GetParam(), bytes, bytes, broadcast, allreduce(64));
  }
}

// A message of the running collective's sequence number with another OpDesc poisons the
// receiver even though no receive matches it.
TEST_P(TransportConformance, ActiveOpMismatchBeforeReceivePosted) {
  run(2, [](int rank, transport::Transport* t) {
    OpDesc theirs = allreduce(10);
    theirs.seq = 5;
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
    EXPECT_TRUE(contains(s, describe_op(theirs))) << s.message();
    t->set_active_op(nullptr);
  });
}

// Cancelling a receive that matched nothing is local: the transport stays healthy and the
// next receive on that (peer, tag) gets the message.
TEST_P(TransportConformance, CancelPostedReceiveThenReuse) {
  run(2, [](int rank, transport::Transport* t) {
    std::vector<uint8_t> buf(100000);
    Request r;
    if (rank == 1) {
      ASSERT_TRUE(t->post_recv(&r, 0, 4, buf.data(), buf.size(), p2p()).ok());
      Request* reqs[] = {&r};
      t->cancel(reqs, 1);
      ASSERT_TRUE(r.done() && r.failed());
      EXPECT_EQ(r.status().code(), COLLX_ERR_ABORTED);
      EXPECT_TRUE(t->health().ok()) << t->health().message();
      ASSERT_TRUE(t->post_recv(&r, 0, 4, buf.data(), buf.size(), p2p()).ok());
      Status s = wait_one(t, &r);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(first_bad(buf, 4), -1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      fill(buf, 4);
      ASSERT_TRUE(t->post_send(&r, 1, 4, buf.data(), buf.size(), p2p()).ok());
      Status s = wait_one(t, &r);
      ASSERT_TRUE(s.ok()) << s.message();
    }
    t->close(Deadline::after_ms(5000));
  });
}

// The timeout names the peers still pending (at most 8, then "and N more"), not the ones
// whose requests completed, and leaves the transport healthy.
TEST_P(TransportConformance, TimeoutNamesPendingPeer) {
  run(3, [](int rank, transport::Transport* t) {
    uint8_t buf[11][4] = {};
    if (rank == 1) {
      Request r;
      ASSERT_TRUE(t->post_send(&r, 0, 1, buf[0], 4, p2p()).ok());
      Status s = wait_one(t, &r);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    if (rank != 0) return;
    Request reqs[11];
    std::vector<Request*> ptrs;
    ASSERT_TRUE(t->post_recv(&reqs[0], 1, 1, buf[0], 4, p2p()).ok());
    ASSERT_TRUE(wait_one(t, &reqs[0]).ok());  // done: must not be listed
    ptrs.push_back(&reqs[0]);
    for (int i = 1; i < 11; ++i) {
      ASSERT_TRUE(t->post_recv(&reqs[i], 2, i, buf[i], 4, p2p()).ok());
      ptrs.push_back(&reqs[i]);
    }
    Status s = t->wait_all(ptrs.data(), ptrs.size(), Deadline::after_ms(200));
    EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT) << s.message();
    EXPECT_TRUE(contains(s, "rank 0: timed out after")) << s.message();
    EXPECT_TRUE(contains(s, "recv from rank 2 (4 bytes")) << s.message();
    EXPECT_FALSE(contains(s, "rank 1")) << s.message();
    EXPECT_TRUE(contains(s, ", and 2 more")) << s.message();
    EXPECT_TRUE(t->health().ok()) << t->health().message();
    t->cancel(ptrs.data(), ptrs.size());
    EXPECT_TRUE(reqs[1].failed());
  });
}

TEST_P(TransportConformance, PoisonNotifiesPeers) {
  run(3, [](int rank, transport::Transport* t) {
    uint8_t buf[4];
    if (rank == 2) {
      t->poison(make_status(COLLX_ERR_INTERNAL, "disk on fire"), true);
      EXPECT_EQ(t->health().code(), COLLX_ERR_INTERNAL);
      Request r;
      EXPECT_EQ(t->post_send(&r, 0, 1, buf, 4, p2p()).code(), COLLX_ERR_INTERNAL);
      return;
    }
    Request r;
    ASSERT_TRUE(t->post_recv(&r, 2, 1, buf, 4, p2p()).ok());
    Status s = wait_one(t, &r, 5000);
    EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
    EXPECT_TRUE(contains(s, "rank 2 failed")) << s.message();
    EXPECT_TRUE(contains(s, "disk on fire")) << s.message();
  });
}

// abort() from a thread that is not waiting wakes every waiter of the rank with
// COLLX_ERR_ABORTED well before their deadline. (How peers learn of it differs: UCX ranks
// that are threads of one process have no liveness check, so it is tested per transport.)
TEST_P(TransportConformance, AbortFromAnotherThreadWakesWaiters) {
  std::atomic<bool> aborted{false};
  run(2, [&](int rank, transport::Transport* t) {
    if (rank == 1) {
      // Stay connected (not calling in) until rank 0 is done, or gave up.
      const Deadline give_up = Deadline::after_ms(30000);
      while (!aborted.load() && !give_up.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    uint8_t buf[3][8];
    Request r[3];
    std::vector<std::thread> waiters;
    std::vector<Status> st(3);
    std::vector<int64_t> waited_ms(3);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(t->post_recv(&r[i], 1, i, buf[i], 8, p2p()).ok());
      waiters.emplace_back([&, i] {
        const int64_t t0 = monotonic_us();
        st[i] = wait_one(t, &r[i], 20000);
        waited_ms[i] = (monotonic_us() - t0) / 1000;
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    t->abort();
    for (auto& w : waiters) w.join();
    aborted = true;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(st[i].code(), COLLX_ERR_ABORTED) << st[i].message();
      EXPECT_LT(waited_ms[i], 10000) << "waiter " << i << " was not woken by abort";
    }
    EXPECT_EQ(t->health().code(), COLLX_ERR_ABORTED);
  });
}

// Several threads of one rank wait at once, each for its own peer: one drives, the others
// are woken when their requests complete or take over the driver role.
TEST_P(TransportConformance, SeveralWaitingThreads) {
  constexpr int kRounds = 10;
  run(4, [](int rank, transport::Transport* t) {
    auto size_of = [](int from, int i) { return static_cast<size_t>(i % 2 == 0 ? 1000 * from : 200000 + from); };
    if (rank != 0) {
      for (int i = 0; i < kRounds; ++i) {
        std::vector<uint8_t> out(size_of(rank, i));
        fill(out, rank * 100 + i);
        Request send;
        ASSERT_TRUE(t->post_send(&send, 0, i, out.data(), out.size(), p2p()).ok());
        Status s = wait_one(t, &send);
        ASSERT_TRUE(s.ok()) << s.message();
      }
      t->close(Deadline::after_ms(5000));
      return;
    }
    std::vector<std::thread> waiters;
    for (int from = 1; from < 4; ++from) {
      waiters.emplace_back([t, from, size_of] {
        for (int i = 0; i < kRounds; ++i) {
          std::vector<uint8_t> in(size_of(from, i));
          Request recv;
          ASSERT_TRUE(t->post_recv(&recv, from, i, in.data(), in.size(), p2p()).ok());
          Status s = wait_one(t, &recv);
          ASSERT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(first_bad(in, from * 100 + i), -1) << from << "/" << i;
        }
      });
    }
    for (auto& w : waiters) w.join();
    t->close(Deadline::after_ms(5000));
  });
}

// An orderly close delivers what was sent before it; the peer then sees "rank 1 left".
TEST_P(TransportConformance, CloseIsReportedAsLeftAfterDelivery) {
  run(2, [](int rank, transport::Transport* t) {
    std::vector<uint8_t> buf(200000);
    Request r;
    if (rank == 1) {
      fill(buf, 9);
      ASSERT_TRUE(t->post_send(&r, 0, 3, buf.data(), buf.size(), p2p()).ok());
      t->close(Deadline::after_ms(5000));
      EXPECT_TRUE(r.done() && !r.failed()) << r.status().message();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(t->post_recv(&r, 1, 3, buf.data(), buf.size(), p2p()).ok());
    Status s = wait_one(t, &r);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(first_bad(buf, 9), -1);
    Request r2;
    s = t->post_recv(&r2, 1, 3, buf.data(), 4, p2p());
    if (s.ok()) s = wait_one(t, &r2, 5000);
    EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
    EXPECT_TRUE(contains(s, "rank 1 left")) << s.message();
  });
}

// A receiver whose receives completed may stop calling into the transport (it computes, or
// its thread ends): the sender's sends must still complete, nothing they need may be left
// queued on the receiver's side. Many large messages, all taken in one wait.
TEST_P(TransportConformance, SendsCompleteWhileTheReceiverIsIdle) {
  constexpr int kMessages = 24;
  constexpr size_t kBytes = 256u << 10;
  std::atomic<bool> sender_done{false};
  run(2, [&](int rank, transport::Transport* t) {
    std::vector<std::vector<uint8_t>> bufs(kMessages, std::vector<uint8_t>(kBytes));
    std::vector<Request> reqs(kMessages);
    std::vector<Request*> ptrs;
    for (int i = 0; i < kMessages; ++i) {
      ptrs.push_back(&reqs[i]);
      if (rank == 1) {
        ASSERT_TRUE(t->post_recv(&reqs[i], 0, i, bufs[i].data(), kBytes, p2p()).ok());
      }
    }
    if (rank == 0) {
      for (int i = 0; i < kMessages; ++i) {
        fill(bufs[i], i);
        ASSERT_TRUE(t->post_send(&reqs[i], 1, i, bufs[i].data(), kBytes, p2p()).ok());
      }
    }
    Status s = t->wait_all(ptrs.data(), ptrs.size(), Deadline::after_ms(rank == 0 ? 5000 : 20000));
    if (rank == 0) sender_done = true;  // also on failure: the receiver must not idle forever
    ASSERT_TRUE(s.ok()) << "rank " << rank << ": " << s.message();
    if (rank == 1) {
      for (int i = 0; i < kMessages; ++i) EXPECT_EQ(first_bad(bufs[i], i), -1) << "message " << i;
      // Idle: no call into the transport until the sender is done (or gave up).
      const Deadline give_up = Deadline::after_ms(30000);
      while (!sender_done.load() && !give_up.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    t->close(Deadline::after_ms(5000));
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportConformance, ::testing::ValuesIn(flavors()), FlavorName());

}  // namespace
}  // namespace conformance
}  // namespace collx
