// Data path of the TCP transport: striping, many tags, unexpected messages and their budget,
// the active-op check's variants, an 8-rank stress and bandwidth. What every transport does
// (sizes, ordering, mismatches, several waiters, ...) is in transports/conformance.
#include "transports/tcp/tcp_transport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "transports/tcp/tcp_test_harness.h"

namespace collx {
namespace tcp_test {
namespace {

constexpr int64_t kTestTimeoutMs = 20000;

Status wait1(transport::Transport& t, Request* r, int64_t ms = kTestTimeoutMs) {
  Request* list[] = {r};
  return t.wait_all(list, 1, Deadline::after_ms(ms));
}
Status wait_vec(transport::Transport& t, std::vector<Request>& reqs, int64_t ms = kTestTimeoutMs) {
  std::vector<Request*> list;
  for (auto& r : reqs) list.push_back(&r);
  return t.wait_all(list.data(), list.size(), Deadline::after_ms(ms));
}

TEST(TcpTransport, ManySocketsAndSmallStripeThreshold) {
  Cluster c;
  ASSERT_OK(make_cluster(2, &c, [](int, TcpTransportParams& p) {
    p.sockets_per_peer = 4;
    p.stripe_min_bytes = 1;
  }));
  run_ranks(2, [&](int r) {
    for (size_t bytes : {0ul, 1ul, 3ul, 4ul, 5000ul, 70000ul, 3000001ul}) {
      std::vector<uint8_t> out = pattern(bytes, bytes + r), in(bytes);
      Request send, recv;
      ASSERT_OK(c[r].post_send(&send, 1 - r, 7, out.data(), bytes, p2p_desc()));
      ASSERT_OK(c[r].post_recv(&recv, 1 - r, 7, in.data(), bytes, p2p_desc()));
      Request* both[] = {&send, &recv};
      ASSERT_OK(c[r].wait_all(both, 2, Deadline::after_ms(kTestTimeoutMs)));
      EXPECT_TRUE(in == pattern(bytes, bytes + 1 - r)) << bytes;
    }
  });
}

TEST(TcpTransport, ManyTagsInterleaved) {
  Cluster c;
  ASSERT_OK(make_cluster(2, &c));
  constexpr int kTags = 7, kPerTag = 20;
  run_ranks(2, [&](int r) {
    std::vector<Request> reqs(kTags * kPerTag);
    std::vector<std::vector<uint8_t>> bufs(kTags * kPerTag);
    if (r == 0) {
      // Sent in tag-major order interleaved: t0 m0, t1 m0, ..., t0 m1, ...
      for (int m = 0; m < kPerTag; ++m) {
        for (int t = 0; t < kTags; ++t) {
          int i = t * kPerTag + m;
          bufs[i] = pattern(100 + i * 13, i);
          ASSERT_OK(c[0].post_send(&reqs[i], 1, 1000 + t, bufs[i].data(), bufs[i].size(), p2p_desc()));
        }
      }
    } else {
      // Received tag by tag, in reverse tag order.
      for (int t = kTags - 1; t >= 0; --t) {
        for (int m = 0; m < kPerTag; ++m) {
          int i = t * kPerTag + m;
          bufs[i].resize(100 + i * 13);
          ASSERT_OK(c[1].post_recv(&reqs[i], 0, 1000 + t, bufs[i].data(), bufs[i].size(), p2p_desc()));
        }
      }
    }
    ASSERT_OK(wait_vec(c[r], reqs));
    if (r == 1) {
      for (int i = 0; i < kTags * kPerTag; ++i) EXPECT_TRUE(bufs[i] == pattern(100 + i * 13, i)) << i;
    }
  });
}

TEST(TcpTransport, UnexpectedAndPostedBeforeArrival) {
  Cluster c;
  ASSERT_OK(make_cluster(2, &c));
  const std::vector<size_t> sizes = {0, 10, 100000, 5u << 20};
  std::atomic<bool> sent{false};
  run_ranks(2, [&](int r) {
    if (r == 0) {
      // Unexpected: everything is sent before rank 1 posts anything.
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<Request> reqs(sizes.size());
      for (size_t i = 0; i < sizes.size(); ++i) bufs.push_back(pattern(sizes[i], i));
      for (size_t i = 0; i < sizes.size(); ++i) ASSERT_OK(c[0].post_send(&reqs[i], 1, 9, bufs[i].data(), sizes[i], p2p_desc()));
      ASSERT_OK(wait_vec(c[0], reqs));
      sent = true;
      // Posted before arrival: rank 1 posts first, then tells us to send.
      Request go;
      uint8_t flag = 0;
      ASSERT_OK(c[0].post_recv(&go, 1, 77, &flag, 1, p2p_desc()));
      ASSERT_OK(wait1(c[0], &go));
      std::vector<uint8_t> late = pattern(3u << 20, 99);
      Request send;
      ASSERT_OK(c[0].post_send(&send, 1, 10, late.data(), late.size(), p2p_desc()));
      ASSERT_OK(wait1(c[0], &send));
    } else {
      // Drive the engine (a receive from another tag) so the messages arrive unexpected.
      while (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      for (size_t i = 0; i < sizes.size(); ++i) {
        std::vector<uint8_t> in(sizes[i], 0xEE);
        Request recv;
        ASSERT_OK(c[1].post_recv(&recv, 0, 9, in.data(), in.size(), p2p_desc()));
        ASSERT_OK(wait1(c[1], &recv));
        EXPECT_TRUE(in == pattern(sizes[i], i)) << sizes[i];
      }
      std::vector<uint8_t> late(3u << 20);
      Request recv, go;
      ASSERT_OK(c[1].post_recv(&recv, 0, 10, late.data(), late.size(), p2p_desc()));
      uint8_t flag = 1;
      ASSERT_OK(c[1].post_send(&go, 0, 77, &flag, 1, p2p_desc()));
      Request* both[] = {&recv, &go};
      ASSERT_OK(c[1].wait_all(both, 2, Deadline::after_ms(kTestTimeoutMs)));
      EXPECT_TRUE(late == pattern(3u << 20, 99));
    }
  });
}

// A small budget and far more unexpected data than fits in it plus the kernel's socket
// buffers: nothing is dropped, the sender is held back by TCP, and everything arrives once
// the receives are posted.
TEST(TcpTransport, UnexpectedBudgetPushesBackWithoutDropping) {
  Cluster c;
  ASSERT_OK(make_cluster(3, &c, [](int, TcpTransportParams& p) { p.unexpected_max_bytes = 3u << 20; }));
  constexpr int kMessages = 160;  // 160 MiB: more than two sockets' kernel buffers can hold
  constexpr size_t kBytes = 1u << 20;
  // Message i is window [i, i + kBytes) of one pattern: distinct, in-order checkable.
  const std::vector<uint8_t> source = pattern(kBytes + kMessages, 1);
  std::atomic<bool> all_sent_early{false};
  run_ranks(3, [&](int r) {
    if (r == 0) {
      std::vector<Request> reqs(kMessages);
      for (int i = 0; i < kMessages; ++i) ASSERT_OK(c[0].post_send(&reqs[i], 1, 3, source.data() + i, kBytes, p2p_desc()));
      Status early = wait_vec(c[0], reqs, 600);
      all_sent_early = early.ok();
      ASSERT_OK(wait_vec(c[0], reqs));
    } else if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      uint8_t byte = 1;
      Request send;
      ASSERT_OK(c[2].post_send(&send, 1, 4, &byte, 1, p2p_desc()));
      ASSERT_OK(wait1(c[2], &send));
    } else {
      // Rank 1 drives (waiting for rank 2) while rank 0's messages pile up unexpected.
      uint8_t byte = 0;
      Request from2;
      ASSERT_OK(c[1].post_recv(&from2, 2, 4, &byte, 1, p2p_desc()));
      ASSERT_OK(wait1(c[1], &from2));
      constexpr int kBatch = 16;
      std::vector<std::vector<uint8_t>> bufs(kBatch, std::vector<uint8_t>(kBytes));
      for (int first = 0; first < kMessages; first += kBatch) {
        std::vector<Request> reqs(kBatch);
        for (int i = 0; i < kBatch; ++i) ASSERT_OK(c[1].post_recv(&reqs[i], 0, 3, bufs[i].data(), kBytes, p2p_desc()));
        ASSERT_OK(wait_vec(c[1], reqs));
        for (int i = 0; i < kBatch; ++i) {
          ASSERT_EQ(0, std::memcmp(bufs[i].data(), source.data() + first + i, kBytes)) << "message " << first + i;
        }
      }
    }
  });
  EXPECT_FALSE(all_sent_early.load()) << "the sender was not held back by the budget";
}

TEST(TcpTransport, ActiveOpMismatchBeforeAnyReceive) {
  OpDesc running;
  running.kind = 1;
  running.count = 100;
  running.seq = 5;
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Cluster c;
    ASSERT_OK(make_cluster(2, &c));
    OpDesc sent = running;
    if (variant == 0) sent.count = 101;  // same collective, different count
    if (variant == 1) sent.seq = 4;      // an older collective nobody received
    if (variant == 2) sent.kind = 2;     // arrives before set_active_op
    std::atomic<bool> delivered{false};
    run_ranks(2, [&](int r) {
      uint8_t buf[16] = {};
      if (r == 0) {
        Request send;
        ASSERT_OK(c[0].post_send(&send, 1, transport::coll_tag(sent.seq, 0), buf, 16, sent));
        ASSERT_OK(wait1(c[0], &send));
        delivered = true;
        return;
      }
      if (variant != 2) c[1].set_active_op(&running);
      // Wait for something else entirely: the check must not need a matching receive.
      Request unrelated;
      ASSERT_OK(c[1].post_recv(&unrelated, 0, 12345, buf, 1, p2p_desc()));
      if (variant == 2) {
        while (!delivered) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        EXPECT_EQ(wait1(c[1], &unrelated, 200).code(), COLLX_ERR_TIMEOUT);  // buffered, not checked yet
        auto start = std::chrono::steady_clock::now();
        c[1].set_active_op(&running);
        EXPECT_LT(ms_since(start), 100);
        EXPECT_EQ(c[1].health().code(), COLLX_ERR_MISMATCH);
      }
      auto start = std::chrono::steady_clock::now();
      Status s = wait1(c[1], &unrelated, 3000);
      EXPECT_EQ(s.code(), COLLX_ERR_MISMATCH) << s.message();
      EXPECT_LT(ms_since(start), 1500);
      EXPECT_NE(s.message().find("rank 1 is running allreduce #5 (count 100)"), std::string::npos) << s.message();
      EXPECT_NE(s.message().find("rank 0 sent"), std::string::npos) << s.message();
    });
  }
}

TEST(TcpTransport, SendToSelf) {
  Cluster c;
  ASSERT_OK(make_cluster(1, &c));
  std::vector<uint8_t> out = pattern(100000, 1), in(100000), early(5);
  Request send, recv;
  ASSERT_OK(c[0].post_send(&send, 0, 1, out.data(), out.size(), p2p_desc()));  // unexpected
  ASSERT_OK(c[0].post_recv(&recv, 0, 1, in.data(), in.size(), p2p_desc()));
  Request* both[] = {&send, &recv};
  ASSERT_OK(c[0].wait_all(both, 2, Deadline::after_ms(1000)));
  EXPECT_TRUE(in == out);
  ASSERT_OK(c[0].post_recv(&recv, 0, 2, early.data(), 5, p2p_desc()));  // posted first
  ASSERT_OK(c[0].post_send(&send, 0, 2, out.data(), 5, p2p_desc()));
  ASSERT_OK(c[0].wait_all(both, 2, Deadline::after_ms(1000)));
  EXPECT_EQ(0, std::memcmp(early.data(), out.data(), 5));
}

TEST(TcpTransport, EightRanksAllToAllStress) {
  constexpr int kRanks = 8, kRounds = 15;
  Cluster c;
  ASSERT_OK(make_cluster(kRanks, &c, [](int, TcpTransportParams& p) { p.stripe_min_bytes = 64 << 10; }));
  auto size_of = [](int round, int from, int to) {
    uint64_t x = (round * 131 + from * 17 + to * 7) % 23;
    return static_cast<size_t>(x < 3 ? 0 : x < 15 ? x * 97 : x * 9000);  // 0, small, striped
  };
  run_ranks(kRanks, [&](int r) {
    for (int round = 0; round < kRounds; ++round) {
      std::vector<Request> reqs(2 * kRanks);
      std::vector<std::vector<uint8_t>> out(kRanks), in(kRanks);
      std::vector<Request*> list;
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        in[p].resize(size_of(round, p, r));
        out[p] = pattern(size_of(round, r, p), round * 10000 + r * 100 + p);
        ASSERT_OK(c[r].post_recv(&reqs[p], p, round, in[p].data(), in[p].size(), p2p_desc()));
        ASSERT_OK(c[r].post_send(&reqs[kRanks + p], p, round, out[p].data(), out[p].size(), p2p_desc()));
        list.push_back(&reqs[p]);
        list.push_back(&reqs[kRanks + p]);
      }
      ASSERT_OK(c[r].wait_all(list.data(), list.size(), Deadline::after_ms(kTestTimeoutMs)));
      for (int p = 0; p < kRanks; ++p) {
        if (p != r) {
          EXPECT_TRUE(in[p] == pattern(size_of(round, p, r), round * 10000 + p * 100 + r));
        }
      }
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_OK(c[r].health());
  run_ranks(kRanks, [&](int r) { c[r].close(Deadline::after_ms(2000)); });
}

TEST(TcpTransport, SmallMessageLatency) {
  Cluster c;
  ASSERT_OK(make_cluster(2, &c));
  constexpr int kRounds = 2000;
  double seconds = 0;
  run_ranks(2, [&](int r) {
    uint64_t value = 0;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) {
      Request req;
      if ((i % 2) == r) {
        value = i;
        ASSERT_OK(c[r].post_send(&req, 1 - r, 1, &value, 8, p2p_desc()));
      } else {
        ASSERT_OK(c[r].post_recv(&req, 1 - r, 1, &value, 8, p2p_desc()));
      }
      ASSERT_OK(wait1(c[r], &req));
      if ((i % 2) != r) {
        ASSERT_EQ(value, static_cast<uint64_t>(i));
      }
    }
    if (r == 0) seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  std::printf("[ latency   ] 8-byte one-way latency between 2 thread-ranks: %.1f us\n", seconds / kRounds * 1e6);
}

// Not a performance gate (shared CI machines vary); prints GB/s for one and two sockets.
TEST(TcpTransport, Bandwidth64MiB) {
  constexpr size_t kBytes = 64u << 20;
  constexpr int kIterations = 6;
  std::vector<uint8_t> out(kBytes, 1), in(kBytes);
  for (int nsocks : {1, 2}) {
    Cluster c;
    ASSERT_OK(make_cluster(2, &c, [&](int, TcpTransportParams& p) { p.sockets_per_peer = nsocks; }));
    double seconds = 0;
    run_ranks(2, [&](int r) {
      for (int i = 0; i < kIterations + 1; ++i) {  // the first round warms up
        auto start = std::chrono::steady_clock::now();
        Request req;
        if (r == 0) {
          ASSERT_OK(c[0].post_send(&req, 1, i, out.data(), kBytes, p2p_desc()));
        } else {
          ASSERT_OK(c[1].post_recv(&req, 0, i, in.data(), kBytes, p2p_desc()));
        }
        ASSERT_OK(wait1(c[r], &req));
        if (r == 1 && i > 0) seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    });
    double gbps = kIterations * kBytes / seconds / 1e9;
    std::printf("[ bandwidth ] 64 MiB point-to-point between 2 thread-ranks, %d socket(s) per peer: %.2f GB/s\n",
                nsocks, gbps);
    EXPECT_GT(gbps, 0.05);
    EXPECT_TRUE(in == out);
  }
}

}  // namespace
}  // namespace tcp_test
}  // namespace collx
