// Failure handling of the TCP transport: timeouts, abort, poison, orderly close versus
// death, cancel, garbage on the listen port, and fd hygiene.
#include "transports/tcp/tcp_transport.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "transports/tcp/socket_util.h"
#include "transports/tcp/tcp_test_harness.h"
#include "transports/tcp/wire.h"

namespace collx {
namespace tcp_test {
namespace {

Status wait1(transport::Transport& t, Request* r, int64_t ms) {
  Request* list[] = {r};
  return t.wait_all(list, 1, Deadline::after_ms(ms));
}

bool contains(const Status& s, const std::string& needle) { return s.message().find(needle) != std::string::npos; }

TEST(TcpFailure, WaitTimeoutNamesPendingPeerAndDoesNotPoison) {
  Cluster c;
  ASSERT_OK(make_cluster(3, &c));
  std::vector<uint8_t> buf(4096);
  Request recv;
  ASSERT_OK(c[0].post_recv(&recv, 2, 1, buf.data(), 4096, p2p_desc()));
  auto start = std::chrono::steady_clock::now();
  Status s = wait1(c[0], &recv, 300);
  EXPECT_GE(ms_since(start), 290);
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT) << s.message();
  EXPECT_TRUE(contains(s, "timed out after")) << s.message();
  EXPECT_TRUE(contains(s, "recv from rank 2 (4096 bytes, 0 received)")) << s.message();
  EXPECT_OK(c[0].health());
  // Still usable: the message arrives later and completes the same receive.
  std::vector<uint8_t> out = pattern(4096, 5);
  Request send;
  ASSERT_OK(c[2].post_send(&send, 0, 1, out.data(), 4096, p2p_desc()));
  ASSERT_OK(wait1(c[0], &recv, 5000));
  ASSERT_OK(wait1(c[2], &send, 5000));
  EXPECT_TRUE(buf == out);
}

TEST(TcpFailure, AbortWakesWaiterAndPeersSeeItFail) {
  Cluster c;
  ASSERT_OK(make_cluster(3, &c));
  uint8_t b0 = 0, b1 = 0, b2 = 0;
  Request r0, r1, r2;
  ASSERT_OK(c[0].post_recv(&r0, 1, 1, &b0, 1, p2p_desc()));
  ASSERT_OK(c[1].post_recv(&r1, 0, 1, &b1, 1, p2p_desc()));
  ASSERT_OK(c[2].post_recv(&r2, 0, 1, &b2, 1, p2p_desc()));
  std::chrono::steady_clock::time_point aborted_at;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    aborted_at = std::chrono::steady_clock::now();
    c[0].abort();
  });
  std::vector<Status> results(3);
  std::vector<int64_t> latency(3);
  run_ranks(3, [&](int r) {
    Request* reqs[] = {&r0, &r1, &r2};
    results[r] = wait1(c[r], reqs[r], 5000);
    latency[r] = ms_since(aborted_at);
  });
  aborter.join();
  EXPECT_EQ(results[0].code(), COLLX_ERR_ABORTED) << results[0].message();
  EXPECT_LT(latency[0], 150);  // ~100 ms asked; slack for loaded 2-core CI machines
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(results[r].code(), COLLX_ERR_REMOTE) << results[r].message();
    EXPECT_TRUE(contains(results[r], "rank 0")) << results[r].message();
    EXPECT_LT(latency[r], 2000);
  }
  EXPECT_EQ(c[0].health().code(), COLLX_ERR_ABORTED);
  Request more;
  EXPECT_EQ(c[0].post_send(&more, 1, 2, &b0, 1, p2p_desc()).code(), COLLX_ERR_ABORTED);
  EXPECT_TRUE(r0.done());
}

TEST(TcpFailure, PoisonWithNotifyReachesEveryPeer) {
  Cluster c;
  ASSERT_OK(make_cluster(3, &c));
  uint8_t b = 0;
  std::vector<Request> reqs(3);
  std::vector<Status> results(3);
  std::thread poisoner([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    c[0].poison(make_status(COLLX_ERR_INTERNAL, "boom"), true);
  });
  run_ranks(3, [&](int r) {
    if (r == 0) return;
    ASSERT_OK(c[r].post_recv(&reqs[r], 0, 1, &b, 1, p2p_desc()));
    results[r] = wait1(c[r], &reqs[r], 3000);
  });
  poisoner.join();
  EXPECT_EQ(c[0].health().code(), COLLX_ERR_INTERNAL);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(results[r].code(), COLLX_ERR_REMOTE) << results[r].message();
    EXPECT_TRUE(contains(results[r], "rank 0 failed: COLLX_ERR_INTERNAL: boom")) << results[r].message();
  }
}

TEST(TcpFailure, CloseMeansLeftAndOthersProceed) {
  Cluster c;
  ASSERT_OK(make_cluster(3, &c));
  // Sent before rank 0 leaves: still delivered afterwards.
  std::vector<uint8_t> parting = pattern(70000, 3);
  Request send;
  ASSERT_OK(c[0].post_send(&send, 1, 8, parting.data(), parting.size(), p2p_desc()));
  ASSERT_OK(wait1(c[0], &send, 5000));
  uint8_t b = 0;
  Request pending;
  ASSERT_OK(c[2].post_recv(&pending, 0, 1, &b, 1, p2p_desc()));
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    c[0].close(Deadline::after_ms(2000));
  });
  Status s = wait1(c[2], &pending, 3000);
  closer.join();
  EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
  EXPECT_TRUE(contains(s, "rank 0 left the communicator")) << s.message();
  EXPECT_OK(c[2].health());
  // Future receives from the departed rank fail at once; ranks 1 and 2 carry on.
  Request later;
  EXPECT_EQ(c[2].post_recv(&later, 0, 2, &b, 1, p2p_desc()).code(), COLLX_ERR_REMOTE);
  std::vector<uint8_t> in(70000);
  Request recv;
  ASSERT_OK(c[1].post_recv(&recv, 0, 8, in.data(), in.size(), p2p_desc()));
  ASSERT_OK(wait1(c[1], &recv, 3000));
  EXPECT_TRUE(in == parting);
  run_ranks(3, [&](int r) {
    if (r == 0) return;
    uint8_t out = static_cast<uint8_t>(r), got = 0;
    Request s2, r2;
    ASSERT_OK(c[r].post_send(&s2, 3 - r, 5, &out, 1, p2p_desc()));
    ASSERT_OK(c[r].post_recv(&r2, 3 - r, 5, &got, 1, p2p_desc()));
    Request* both[] = {&s2, &r2};
    ASSERT_OK(c[r].wait_all(both, 2, Deadline::after_ms(3000)));
    EXPECT_EQ(got, 3 - r);
  });
}

TEST(TcpFailure, DestroyWithoutCloseIsReportedAsDeath) {
  Cluster c;
  ASSERT_OK(make_cluster(3, &c));
  uint8_t b1 = 0, b2 = 0;
  Request r1, r2;
  ASSERT_OK(c[1].post_recv(&r1, 0, 1, &b1, 1, p2p_desc()));
  ASSERT_OK(c[2].post_recv(&r2, 1, 1, &b2, 1, p2p_desc()));  // waits on a survivor
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    c.t[0].reset();
  });
  auto start = std::chrono::steady_clock::now();
  std::vector<Status> results(3);
  run_ranks(3, [&](int r) {
    if (r == 1) results[1] = wait1(c[1], &r1, 3000);
    if (r == 2) results[2] = wait1(c[2], &r2, 3000);
  });
  killer.join();
  EXPECT_LT(ms_since(start), 2100);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(results[r].code(), COLLX_ERR_REMOTE) << results[r].message();
    EXPECT_TRUE(contains(results[r], "lost connection to rank 0")) << results[r].message();
    EXPECT_TRUE(contains(results[r], "died or aborted")) << results[r].message();
  }
}

TEST(TcpFailure, CancelPostedAndPartlyReceived) {
  Cluster c;
  ASSERT_OK(make_cluster(2, &c));
  // A receive nobody matched: cancelled; a message for its tag then goes elsewhere.
  std::vector<uint8_t> victim(16, 0x11);
  Request cancelled;
  ASSERT_OK(c[1].post_recv(&cancelled, 0, 1, victim.data(), 16, p2p_desc()));
  Request* list[] = {&cancelled};
  c[1].cancel(list, 1);
  ASSERT_TRUE(cancelled.done());
  EXPECT_EQ(cancelled.status().code(), COLLX_ERR_ABORTED);
  EXPECT_TRUE(contains(cancelled.status(), "cancelled"));

  // A large receive cancelled midway: the rest of its payload is dropped, the buffer is
  // never touched again and the next message on the stream arrives intact.
  constexpr size_t kBig = 48u << 20;
  std::vector<uint8_t> big_out = pattern(kBig, 1), big_in(kBig);
  std::vector<uint8_t> next_out = pattern(16, 2), next_in(16);
  Request big_recv, big_send, next_send, next_recv;
  ASSERT_OK(c[1].post_recv(&big_recv, 0, 2, big_in.data(), kBig, p2p_desc()));
  ASSERT_OK(c[0].post_send(&big_send, 1, 2, big_out.data(), kBig, p2p_desc()));
  ASSERT_OK(c[0].post_send(&next_send, 1, 2, next_out.data(), 16, p2p_desc()));
  std::thread sender([&] {
    Request* both[] = {&big_send, &next_send};
    EXPECT_OK(c[0].wait_all(both, 2, Deadline::after_ms(10000)));
    // Progress happens only inside wait_all: rank 1 keeps draining the cancelled message's
    // other fragment while it waits for this.
    uint8_t done = 1;
    Request done_send;
    EXPECT_OK(c[0].post_send(&done_send, 1, 3, &done, 1, p2p_desc()));
    EXPECT_OK(wait1(c[0], &done_send, 10000));
  });
  Request* big_list[] = {&big_recv};
  for (int i = 0; i < 200 && !big_recv.done(); ++i) {
    EXPECT_EQ(c[1].wait_all(big_list, 1, Deadline::after_ms(1)).code(), COLLX_ERR_TIMEOUT);
    if (std::count(big_in.begin(), big_in.end(), 0) < static_cast<long>(kBig)) break;  // partly received
  }
  c[1].cancel(big_list, 1);
  EXPECT_EQ(big_recv.status().code(), COLLX_ERR_ABORTED);
  std::fill(big_in.begin(), big_in.end(), 0xEE);
  ASSERT_OK(c[1].post_recv(&next_recv, 0, 2, next_in.data(), 16, p2p_desc()));
  ASSERT_OK(wait1(c[1], &next_recv, 10000));
  uint8_t done = 0;
  Request done_recv;
  ASSERT_OK(c[1].post_recv(&done_recv, 0, 3, &done, 1, p2p_desc()));
  ASSERT_OK(wait1(c[1], &done_recv, 10000));
  sender.join();
  EXPECT_TRUE(next_in == next_out);
  EXPECT_EQ(std::count(big_in.begin(), big_in.end(), 0xEE), static_cast<long>(kBig));
  EXPECT_OK(c[1].health());
  // The cancelled small receive's buffer was not written either.
  EXPECT_EQ(std::count(victim.begin(), victim.end(), 0x11), 16);
}

TEST(TcpFailure, CancelQueuedSendKeepsStreamAndPartialSendPoisons) {
  Cluster c;
  ASSERT_OK(make_cluster(2, &c));
  constexpr size_t kBig = 64u << 20;
  std::vector<uint8_t> big = pattern(kBig, 1), small = pattern(100, 2), other = pattern(100, 3);
  Request big_send, small_send;
  ASSERT_OK(c[0].post_send(&big_send, 1, 1, big.data(), kBig, p2p_desc()));  // fills the socket buffers
  ASSERT_OK(c[0].post_send(&small_send, 1, 1, small.data(), 100, p2p_desc()));  // queued behind it
  ASSERT_FALSE(big_send.done());
  Request* list[] = {&small_send};
  c[0].cancel(list, 1);
  EXPECT_EQ(small_send.status().code(), COLLX_ERR_ABORTED);
  EXPECT_OK(c[0].health());
  Request other_send;
  ASSERT_OK(c[0].post_send(&other_send, 1, 1, other.data(), 100, p2p_desc()));
  std::vector<uint8_t> big_in(kBig), other_in(100);
  Request big_recv, other_recv;
  ASSERT_OK(c[1].post_recv(&big_recv, 0, 1, big_in.data(), kBig, p2p_desc()));
  ASSERT_OK(c[1].post_recv(&other_recv, 0, 1, other_in.data(), 100, p2p_desc()));
  std::thread sender([&] {
    Request* both[] = {&big_send, &other_send};
    EXPECT_OK(c[0].wait_all(both, 2, Deadline::after_ms(10000)));
  });
  Request* recvs[] = {&big_recv, &other_recv};
  ASSERT_OK(c[1].wait_all(recvs, 2, Deadline::after_ms(10000)));
  sender.join();
  EXPECT_TRUE(big_in == big);
  EXPECT_TRUE(other_in == other);  // the cancelled message never went out

  // Cancelling a send that is partly on the wire breaks the stream: poison, peer told.
  ASSERT_OK(c[0].post_send(&big_send, 1, 2, big.data(), kBig, p2p_desc()));
  ASSERT_FALSE(big_send.done());
  Request* partial[] = {&big_send};
  c[0].cancel(partial, 1);
  EXPECT_TRUE(big_send.failed());
  EXPECT_EQ(c[0].health().code(), COLLX_ERR_ABORTED);
  uint8_t b;
  Request r;
  ASSERT_OK(c[1].post_recv(&r, 0, 3, &b, 1, p2p_desc()));
  Status s = wait1(c[1], &r, 3000);
  EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
}

// Connects to `address` and returns the fd (blocking), or -1.
int raw_connect(const std::string& address) {
  tcp::SocketAddress a;
  if (!tcp::parse_address(address, &a).ok()) return -1;
  int fd = ::socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, a.sa(), a.length) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// True when the transport closed the connection (end of stream or reset) within ~3 s.
bool closed_by_peer(int fd) {
  uint8_t buf[64];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE));
}

TEST(TcpFailure, GarbageOnListenPortIsDroppedAndTrafficFlows) {
  Cluster c;
  ASSERT_OK(make_cluster(2, &c, [](int, TcpTransportParams& p) { p.hello_timeout_ms = 300; }));
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::atomic<bool> traffic_ok{true};
  // Ping-pong keeps both engines driving while the garbage arrives. Rank 0 decides when to
  // stop and says so in byte 0 of its message, so both ranks run the same rounds.
  std::thread traffic([&] {
    run_ranks(2, [&](int r) {
      for (int i = 0;; ++i) {
        std::vector<uint8_t> out = pattern(3000, i * 2 + r), in(3000);
        const bool last = r == 0 && stop.load() && i >= 10;
        out[0] = last ? 1 : 0;
        Request s, rr;
        Status a = c[r].post_send(&s, 1 - r, i, out.data(), out.size(), p2p_desc());
        Status b = c[r].post_recv(&rr, 1 - r, i, in.data(), in.size(), p2p_desc());
        Request* both[] = {&s, &rr};
        Status w = a.ok() && b.ok() ? c[r].wait_all(both, 2, Deadline::after_ms(5000)) : a;
        std::vector<uint8_t> expected = pattern(3000, i * 2 + 1 - r);
        if (!w.ok() || !std::equal(in.begin() + 1, in.end(), expected.begin() + 1)) {
          traffic_ok = false;
          ADD_FAILURE() << w.message();
          return;
        }
        if (r == 0) ++rounds;
        if (r == 0 ? last : in[0] == 1) return;
      }
    });
  });
  const std::string address = c[0].listen_address();
  std::mt19937 rng(7);

  int random_fd = raw_connect(address);
  ASSERT_GE(random_fd, 0);
  std::vector<uint8_t> junk(1000);
  for (auto& b : junk) b = static_cast<uint8_t>(rng());
  ASSERT_EQ(::send(random_fd, junk.data(), junk.size(), MSG_NOSIGNAL), static_cast<ssize_t>(junk.size()));

  auto hello_fd = [&](uint64_t comm_id, int src, int index) {
    int fd = raw_connect(address);
    tcp::Hello hello;
    hello.comm_id = comm_id;
    hello.src_rank = src;
    hello.dst_rank = 0;
    hello.socket_index = static_cast<uint32_t>(index);
    hello.sockets_per_peer = 2;
    uint8_t bytes[tcp::kHelloBytes];
    tcp::encode_hello(hello, bytes);
    EXPECT_EQ(::send(fd, bytes, sizeof bytes, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof bytes));
    return fd;
  };
  int wrong_comm_fd = hello_fd(c.comm_id + 1, 1, 0);
  int duplicate_fd = hello_fd(c.comm_id, 1, 0);
  int hold_fd = raw_connect(address);  // says nothing
  ASSERT_GE(hold_fd, 0);

  EXPECT_TRUE(closed_by_peer(random_fd));
  EXPECT_TRUE(closed_by_peer(wrong_comm_fd));
  EXPECT_TRUE(closed_by_peer(duplicate_fd));
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed_by_peer(hold_fd));
  EXPECT_LT(ms_since(start), 2000);
  for (int fd : {random_fd, wrong_comm_fd, duplicate_fd, hold_fd}) ::close(fd);

  int before = rounds.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  stop = true;
  traffic.join();
  EXPECT_TRUE(traffic_ok.load());
  EXPECT_GT(rounds.load(), before);
  EXPECT_OK(c[0].health());
  EXPECT_OK(c[1].health());
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Waiting must sleep in the kernel: 8 ranks waiting for 1 s, one of them with a socket
// paused by a full unexpected budget (data pending in the kernel), must use little CPU.
TEST(TcpFailure, IdleWaitersDoNotSpin) {
  constexpr int kRanks = 8;
  std::vector<uint8_t> big = pattern(8u << 20, 1);
  std::vector<Request> sends(4);  // outlives the transports, which may still hold them
  Cluster c;
  ASSERT_OK(make_cluster(kRanks, &c, [](int, TcpTransportParams& p) { p.unexpected_max_bytes = 1u << 20; }));
  for (int i = 0; i < 4; ++i) ASSERT_OK(c[1].post_send(&sends[i], 0, 1, big.data() + i, 2u << 20, p2p_desc()));
  double before = cpu_seconds();
  auto start = std::chrono::steady_clock::now();
  run_ranks(kRanks, [&](int r) {
    uint8_t b;
    Request never;
    ASSERT_OK(c[r].post_recv(&never, (r + 2) % kRanks, 99, &b, 1, p2p_desc()));
    EXPECT_EQ(wait1(c[r], &never, 1000).code(), COLLX_ERR_TIMEOUT);
    Request* list[] = {&never};
    c[r].cancel(list, 1);  // it goes out of scope: the transport must forget it
  });
  double used = cpu_seconds() - before;
  EXPECT_GE(ms_since(start), 1000);
  EXPECT_LT(used, 0.25) << "waiting ranks burned " << used << " s of CPU in 1 s";
  std::printf("[ idle cpu  ] 8 waiting ranks used %.3f s of CPU in 1 s\n", used);
  // The paused data is all there once received.
  std::vector<uint8_t> in(2u << 20);
  for (int i = 0; i < 4; ++i) {
    Request recv;
    ASSERT_OK(c[0].post_recv(&recv, 1, 1, in.data(), in.size(), p2p_desc()));
    run_ranks(2, [&](int r) {
      if (r == 0) EXPECT_OK(wait1(c[0], &recv, 5000));
      if (r == 1) EXPECT_OK(wait1(c[1], &sends[i], 5000));
    });
    EXPECT_EQ(0, std::memcmp(in.data(), big.data() + i, in.size())) << i;
  }
}

TEST(TcpFailure, FdCountReturnsToBaseline) {
  const int baseline = count_open_fds();
  ASSERT_GT(baseline, 0);
  for (bool orderly : {true, false}) {
    Cluster c;
    ASSERT_OK(make_cluster(4, &c));
    EXPECT_GT(count_open_fds(), baseline + 4 * 3 * 2);
    run_ranks(4, [&](int r) {
      std::vector<uint8_t> out = pattern(100000, r), in(100000);
      Request s, rr;
      ASSERT_OK(c[r].post_send(&s, (r + 1) % 4, 0, out.data(), out.size(), p2p_desc()));
      ASSERT_OK(c[r].post_recv(&rr, (r + 3) % 4, 0, in.data(), in.size(), p2p_desc()));
      Request* both[] = {&s, &rr};
      ASSERT_OK(c[r].wait_all(both, 2, Deadline::after_ms(5000)));
      if (orderly) c[r].close(Deadline::after_ms(2000));
    });
    c.t.clear();
    EXPECT_EQ(count_open_fds(), baseline) << (orderly ? "after close" : "after destroy without close");
  }
}

TEST(TcpFailure, SetupTimesOutNamingMissingRanks) {
  // Rank 1 of 2 never shows up: rank 0's address exchange times out (the bootstrap says so).
  auto board = std::make_shared<Board>(2);
  BoardBootstrap bootstrap(board, 0);
  TcpTransportParams params;
  params.rank = 0;
  params.size = 2;
  params.bootstrap = &bootstrap;
  params.deadline = Deadline::after_ms(200);
  std::unique_ptr<TcpTransport> t;
  Status s = create_tcp_transport(params, &t);
  EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT) << s.message();

  // Mismatched COLLX_TCP_NSOCKS is an error, not a hang.
  Cluster c;
  Status mixed = make_cluster(2, &c, [](int r, TcpTransportParams& p) {
    p.sockets_per_peer = r + 1;
    p.deadline = Deadline::after_ms(3000);
  });
  EXPECT_FALSE(mixed.ok());
  EXPECT_TRUE(contains(mixed, "COLLX_TCP_NSOCKS")) << mixed.message();
}

}  // namespace
}  // namespace tcp_test
}  // namespace collx
