// The TCP transport across processes: a rank killed with SIGKILL (no chance to say
// anything) is reported to the survivor within 2 seconds, by name; and connection setup
// errors name the peer and its address.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "transports/tcp/socket_util.h"
#include "transports/tcp/tcp_fake_peer.h"
#include "transports/tcp/tcp_test_harness.h"
#include "transports/tcp/wire.h"

namespace collx {
namespace tcp_test {
namespace {

// Two processes exchange their blobs over a pipe pair (one allgather of two ranks).
class PipeBootstrap : public transport::Bootstrap {
 public:
  PipeBootstrap(int rank, int read_fd, int write_fd) : rank_(rank), read_fd_(read_fd), write_fd_(write_fd) {}
  Status allgather(const std::string&, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                   Deadline) override {
    uint32_t length = static_cast<uint32_t>(mine.size());
    if (::write(write_fd_, &length, 4) != 4 || ::write(write_fd_, mine.data(), length) != static_cast<ssize_t>(length)) {
      return make_status(COLLX_ERR_SYSTEM, "pipe write");
    }
    uint32_t other_length = 0;
    if (::read(read_fd_, &other_length, 4) != 4 || other_length > 256) return make_status(COLLX_ERR_SYSTEM, "pipe read");
    std::vector<uint8_t> other(other_length);
    size_t got = 0;
    while (got < other_length) {
      ssize_t n = ::read(read_fd_, other.data() + got, other_length - got);
      if (n <= 0) return make_status(COLLX_ERR_SYSTEM, "pipe read");
      got += static_cast<size_t>(n);
    }
    all->assign(2, {});
    (*all)[rank_] = mine;
    (*all)[1 - rank_] = other;
    return Status::Ok();
  }

 private:
  int rank_, read_fd_, write_fd_;
};

TEST(TcpProcess, KilledPeerIsReportedWithinTwoSeconds) {
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t child = ::fork();  // no other threads exist yet in this process
  ASSERT_GE(child, 0);
  if (child == 0) {
    PipeBootstrap bootstrap(1, to_child[0], to_parent[1]);
    TcpTransportParams params;
    params.rank = 1;
    params.size = 2;
    params.comm_id = 42;
    params.bootstrap = &bootstrap;
    params.deadline = Deadline::after_ms(10000);
    std::unique_ptr<TcpTransport> t;
    if (!create_tcp_transport(params, &t).ok()) ::_exit(1);
    // Keep a receive pending, as a live rank would, until killed.
    uint8_t byte;
    Request recv;
    if (!t->post_recv(&recv, 0, 1, &byte, 1, p2p_desc()).ok()) ::_exit(2);
    Request* list[] = {&recv};
    t->wait_all(list, 1, Deadline::after_ms(20000)).ignore();
    ::_exit(3);
  }
  PipeBootstrap bootstrap(0, to_parent[0], to_child[1]);
  TcpTransportParams params;
  params.rank = 0;
  params.size = 2;
  params.comm_id = 42;
  params.bootstrap = &bootstrap;
  params.deadline = Deadline::after_ms(10000);
  std::unique_ptr<TcpTransport> t;
  Status created = create_tcp_transport(params, &t);
  if (!created.ok()) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    FAIL() << created.message();
  }
  uint8_t byte = 0;
  Request recv;
  ASSERT_OK(t->post_recv(&recv, 1, 1, &byte, 1, p2p_desc()));
  std::chrono::steady_clock::time_point killed_at;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    killed_at = std::chrono::steady_clock::now();
    ::kill(child, SIGKILL);
  });
  Request* list[] = {&recv};
  Status s = t->wait_all(list, 1, Deadline::after_ms(5000));
  killer.join();
  int64_t latency = ms_since(killed_at);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
  EXPECT_NE(s.message().find("lost connection to rank 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("died or aborted"), std::string::npos) << s.message();
  EXPECT_LT(latency, 2000);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) ::close(fd);
}

// Hands out fixed addresses: this rank's real one, the others' from the test.
class FixedBootstrap : public transport::Bootstrap {
 public:
  FixedBootstrap(int rank, std::vector<std::string> addresses) : rank_(rank), addresses_(std::move(addresses)) {}
  Status allgather(const std::string&, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                   Deadline) override {
    all->clear();
    for (size_t r = 0; r < addresses_.size(); ++r) {
      if (static_cast<int>(r) == rank_) {
        all->push_back(mine);
      } else {
        all->emplace_back(addresses_[r].begin(), addresses_[r].end());
      }
    }
    return Status::Ok();
  }

 private:
  int rank_;
  std::vector<std::string> addresses_;
};

TEST(TcpProcess, SetupErrorsNamePeerAndAddress) {
  // A listener that never accepts: the kernel completes the connection, nobody answers.
  tcp::SocketAddress local;
  ASSERT_OK(tcp::parse_address("127.0.0.1:0", &local));
  UniqueFd mute;
  tcp::SocketAddress mute_address;
  ASSERT_OK(tcp::listen_on(local, 16, &mute, &mute_address));
  {
    FixedBootstrap bootstrap(1, {mute_address.to_string(), ""});
    TcpTransportParams params;
    params.rank = 1;
    params.size = 2;
    params.bootstrap = &bootstrap;
    params.deadline = Deadline::after_ms(300);
    std::unique_ptr<TcpTransport> t;
    Status s = create_tcp_transport(params, &t);
    EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT) << s.message();
    EXPECT_NE(s.message().find("to rank 0 at " + mute_address.to_string()), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("waiting for CHALLENGE"), std::string::npos) << s.message();
  }
  // Rank 0 waits for rank 1, which never connects: the timeout names the missing rank.
  {
    FixedBootstrap bootstrap(0, {"", mute_address.to_string()});
    TcpTransportParams params;
    params.rank = 0;
    params.size = 2;
    params.bootstrap = &bootstrap;
    params.deadline = Deadline::after_ms(300);
    std::unique_ptr<TcpTransport> t;
    Status s = create_tcp_transport(params, &t);
    EXPECT_EQ(s.code(), COLLX_ERR_TIMEOUT) << s.message();
    EXPECT_NE(s.message().find("from rank 1 (2 of 2 sockets"), std::string::npos) << s.message();
  }
  // Nothing listens: refused (after a short retry), naming rank and address. The port stays
  // bound (without listen) for the whole check, so no concurrent test can take it over.
  mute.reset();
  {
    UniqueFd bound_only(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(bound_only.valid());
    tcp::SocketAddress closed = local;
    ASSERT_EQ(::bind(bound_only.get(), closed.sa(), closed.length), 0);
    closed.length = sizeof closed.storage;
    ASSERT_EQ(::getsockname(bound_only.get(), closed.sa(), &closed.length), 0);
    FixedBootstrap bootstrap(1, {closed.to_string(), ""});
    TcpTransportParams params;
    params.rank = 1;
    params.size = 2;
    params.bootstrap = &bootstrap;
    params.deadline = Deadline::after_ms(5000);
    std::unique_ptr<TcpTransport> t;
    auto start = std::chrono::steady_clock::now();
    Status s = create_tcp_transport(params, &t);
    EXPECT_LT(ms_since(start), 4000);
    EXPECT_EQ(s.code(), COLLX_ERR_SYSTEM) << s.message();
    EXPECT_NE(s.message().find("cannot connect to rank 0 at " + closed.to_string() + ": Connection refused"),
              std::string::npos)
        << s.message();
  }
  // A malformed published address is rejected by name.
  {
    FixedBootstrap bootstrap(1, {"not-an-address", ""});
    TcpTransportParams params;
    params.rank = 1;
    params.size = 2;
    params.bootstrap = &bootstrap;
    std::unique_ptr<TcpTransport> t;
    Status s = create_tcp_transport(params, &t);
    EXPECT_EQ(s.code(), COLLX_ERR_PROTOCOL) << s.message();
    EXPECT_NE(s.message().find("rank 0 published a malformed TCP address"), std::string::npos) << s.message();
  }
}

TEST(TcpProcess, ProtocolViolationsFromAnEstablishedPeerPoison) {
  struct Case {
    const char* name;
    std::function<void(FakePeer&)> misbehave;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"garbage bytes", [](FakePeer& f) { f.send_raw(std::string(80, 'x').data(), 80); }, "bad frame magic"},
      {"fragment past its message",
       [](FakePeer& f) {
         tcp::FrameHeader h = data_frame(1, 100);
         h.frag_bytes = 200;
         f.send_frame(h);
       },
       "outside its message"},
      {"2 TiB message (nothing allocated)",
       [](FakePeer& f) {
         tcp::FrameHeader h = data_frame(1, 0);
         h.msg_bytes = 2ull << 40;
         h.frag_bytes = 1000;
         f.send_frame(h);
       },
       "1 TiB"},
      {"message ids going backwards",
       [](FakePeer& f) {
         uint8_t b = 1;
         f.send_frame(data_frame(2, 1), &b, 1);
         f.send_frame(data_frame(2, 1), &b, 1);
       },
       "message id 2 after 2"},
      {"wrong source rank",
       [](FakePeer& f) {
         tcp::FrameHeader h = data_frame(1, 0);
         h.src_rank = 0;
         f.send_frame(h);
       },
       "source rank 0"},
      {"fragment of a message never announced",
       [](FakePeer& f) {
         tcp::FrameHeader h = data_frame(1, 100);
         h.frag_offset = 50;
         h.frag_bytes = 50;
         f.send_frame(h);
       },
       "before its first fragment"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    FakePeer fake;
    ASSERT_OK(fake.start(next_comm_id()));
    c.misbehave(fake);
    Status s = receive_from_fake(fake, 1);
    if (s.ok()) s = receive_from_fake(fake, 1);  // a valid message first: the violation follows
    EXPECT_EQ(s.code(), COLLX_ERR_PROTOCOL) << s.message();
    EXPECT_NE(s.message().find("protocol violation by rank 1"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
    // The offender is told (best effort) and the connection is shut down.
    uint8_t buf[256];
    timeval tv{2, 0};
    ::setsockopt(fake.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n = ::recv(fake.fd, buf, sizeof buf, 0);
    EXPECT_GE(n, static_cast<ssize_t>(tcp::kFrameHeaderBytes));  // its POISON frame
  }
}

TEST(TcpProcess, PoisonAndGoodbyeFramesFromAPeer) {
  {
    FakePeer fake;
    ASSERT_OK(fake.start(next_comm_id()));
    std::string text = "rank 1 ran out of patience\n";
    tcp::FrameHeader h;
    h.type = tcp::FrameType::kPoison;
    h.src_rank = 1;
    h.tag = static_cast<uint64_t>(static_cast<int64_t>(COLLX_ERR_TIMEOUT));
    h.msg_bytes = h.frag_bytes = static_cast<uint32_t>(text.size());
    fake.send_frame(h, text.data(), text.size());
    Status s = receive_from_fake(fake, 1);
    EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
    EXPECT_NE(s.message().find("rank 1 failed: COLLX_ERR_TIMEOUT: rank 1 ran out of patience?"), std::string::npos)
        << s.message();
  }
  {
    // A message, then GOODBYE and an orderly close: the message is still delivered, and a
    // receive for anything more fails with "left".
    FakePeer fake;
    ASSERT_OK(fake.start(next_comm_id()));
    uint8_t payload[3] = {7, 8, 9};
    fake.send_frame(data_frame(1, 3), payload, 3);
    tcp::FrameHeader bye;
    bye.type = tcp::FrameType::kGoodbye;
    bye.src_rank = 1;
    fake.send_frame(bye);
    ::shutdown(fake.fd, SHUT_WR);
    std::vector<uint8_t> got;
    ASSERT_OK(receive_from_fake(fake, 3, &got));
    EXPECT_EQ(got, std::vector<uint8_t>({7, 8, 9}));
    Status s = receive_from_fake(fake, 3);
    EXPECT_EQ(s.code(), COLLX_ERR_REMOTE) << s.message();
    EXPECT_NE(s.message().find("rank 1 left the communicator"), std::string::npos) << s.message();
    EXPECT_OK(fake.rank0->health());
  }
}

}  // namespace
}  // namespace tcp_test
}  // namespace collx
