// A live rank that stops reading for longer than the liveness window (a checkpoint, an
// evaluation) while a peer has far more than a socket buffer queued to it is not a partition:
// the transfer completes once it reads again. The kernel's TCP_USER_TIMEOUT (Linux >= 5.11)
// drops such a connection, which is why the transport checks unacknowledged data itself
// (tcp_unacked.cc); the partition itself: tests/launcher/partition_test.sh.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "tests/support/socket_options.h"
#include "transports/tcp/tcp_test_harness.h"

namespace collx {
namespace tcp_test {
namespace {

constexpr int kWindowMs = 1500;
constexpr int kReaderAwayMs = 3 * kWindowMs;
constexpr size_t kMessageBytes = 32u << 20;  // 512 times the socket buffers

// Short liveness settings, small socket buffers; `user_timeout_ms` and `unacked_timeout_ms`
// choose who watches the data in flight.
void short_liveness(TcpTransportParams& params, int user_timeout_ms, int unacked_timeout_ms) {
  params.liveness = SocketLiveness{1, 1, 2, user_timeout_ms, unacked_timeout_ms};
  params.socket_buffer_bytes = 64 << 10;
}

// What the sender's kernel says while the reader is away (both ranks are in this process;
// only the sender has data queued): the longest time since the last ACK on a socket with
// data queued, and on a socket with data sent and unacknowledged, in ms.
struct AckSilence {
  int64_t queued_ms = 0;
  int64_t unacked_ms = 0;
};

void observe_ack_silence(const std::vector<int>& before, AckSilence* longest) {
  for (int fd : testing::connected_tcp_sockets()) {
    if (std::find(before.begin(), before.end(), fd) != before.end()) continue;
    int queued = 0;
    if (::ioctl(fd, TIOCOUTQ, &queued) != 0 || queued == 0) continue;
    tcp_info info{};
    socklen_t length = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) continue;
    longest->queued_ms = std::max<int64_t>(longest->queued_ms, info.tcpi_last_ack_recv);
    if (info.tcpi_unacked > 0) longest->unacked_ms = std::max<int64_t>(longest->unacked_ms, info.tcpi_last_ack_recv);
  }
}

struct Outcome {
  Status sent;
  Status received;
  bool data_intact = false;
  AckSilence silence;  // seen by the sender while the reader was away
};

// Waits for one request (generously: the machine may be loaded) and returns its outcome.
Status wait_for(TcpTransport& transport, Request* request) {
  Request* list[] = {request};
  Status waited = transport.wait_all(list, 1, Deadline::after_ms(120000));
  return waited.ok() ? request->status() : waited;
}

// Rank 0 sends kMessageBytes to rank 1, which stays away from the transport for
// kReaderAwayMs before posting its receive.
Outcome send_to_a_reader_that_is_away(int user_timeout_ms, int unacked_timeout_ms) {
  Outcome outcome;
  const std::vector<int> before = testing::connected_tcp_sockets();
  Cluster cluster;
  outcome.sent = make_cluster(2, &cluster, [&](int, TcpTransportParams& params) {
    short_liveness(params, user_timeout_ms, unacked_timeout_ms);
  });
  if (!outcome.sent.ok()) return outcome;
  const std::vector<uint8_t> message = pattern(kMessageBytes, 7);
  std::vector<uint8_t> received(kMessageBytes, 0);
  std::atomic<bool> reader_back{false};
  run_ranks(3, [&](int r) {
    if (r == 0) {
      Request send;
      outcome.sent = cluster[0].post_send(&send, 1, 5, message.data(), message.size(), p2p_desc());
      if (outcome.sent.ok()) outcome.sent = wait_for(cluster[0], &send);
    } else if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kReaderAwayMs));
      reader_back = true;
      Request recv;
      outcome.received = cluster[1].post_recv(&recv, 0, 5, received.data(), received.size(), p2p_desc());
      if (outcome.received.ok()) outcome.received = wait_for(cluster[1], &recv);
    } else {
      while (!reader_back) {
        observe_ack_silence(before, &outcome.silence);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  outcome.data_intact = received == message;
  return outcome;
}

bool kernel_at_least(int major, int minor) {
  utsname name{};
  int have_major = 0, have_minor = 0;
  if (::uname(&name) != 0 || std::sscanf(name.release, "%d.%d", &have_major, &have_minor) != 2) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

TEST(TcpUnacked, APeerThatStopsReadingForThreeWindowsIsNotFailed) {
  const Outcome outcome = send_to_a_reader_that_is_away(0, kWindowMs);
  EXPECT_OK(outcome.sent);
  EXPECT_OK(outcome.received);
  EXPECT_TRUE(outcome.data_intact);
  // Why the check holds: once the reader's window is full, everything sent is acknowledged
  // (zero-window probes carry no new data), so no socket has unacknowledged data that went a
  // window without an ACK. The time since the last ACK itself is not small: the probes back
  // off exponentially (up to 120 s apart), so it is printed, not bounded.
  std::printf("sender while the reader was away: longest without an ACK %lld ms with data queued, %lld ms with "
              "data unacknowledged (window %d ms)\n",
              static_cast<long long>(outcome.silence.queued_ms), static_cast<long long>(outcome.silence.unacked_ms),
              kWindowMs);
  EXPECT_LT(outcome.silence.unacked_ms, kWindowMs);
}

// The trap the check avoids: with TCP_USER_TIMEOUT set to the same window, the kernel drops
// the connection to the live but busy peer, and the sender reports it unreachable.
TEST(TcpUnacked, TheKernelUserTimeoutDropsAPeerThatStopsReading) {
  if (!kernel_at_least(5, 11)) GTEST_SKIP() << "before Linux 5.11 TCP_USER_TIMEOUT ignores zero-window probing";
  const Outcome outcome = send_to_a_reader_that_is_away(kWindowMs, 0);
  EXPECT_EQ(outcome.sent.code(), COLLX_ERR_REMOTE) << outcome.sent.message();
  EXPECT_NE(outcome.sent.message().find("rank 1 is unreachable"), std::string::npos) << outcome.sent.message();
  EXPECT_FALSE(outcome.received.ok());
}

}  // namespace
}  // namespace tcp_test
}  // namespace collx
