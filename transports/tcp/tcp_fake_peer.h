// Test helper: rank 0 is a real TCP transport; "rank 1" is the test speaking the wire
// protocol by hand (handshake included, job token or not), so it can send what a correct
// peer never would. Used by tcp_process_test and tcp_auth_test.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/common/auth.h"
#include "transports/tcp/socket_util.h"
#include "transports/tcp/tcp_test_harness.h"
#include "transports/tcp/wire.h"

namespace collx {
namespace tcp_test {

// The connecting side of the handshake over a blocking socket: HELLO, CHALLENGE, AUTH (with
// `token`, and `trailing` bytes sent right behind it), HELLO_ACK. "" when rank 0 accepted,
// else why not.
inline std::string fake_handshake(int fd, const tcp::Hello& hello, const std::string& token,
                                  const std::vector<uint8_t>& trailing = {}) {
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  uint8_t hello_bytes[tcp::kHelloBytes];
  tcp::encode_hello(hello, hello_bytes);
  if (::send(fd, hello_bytes, sizeof hello_bytes, MSG_NOSIGNAL) != sizeof hello_bytes) return "HELLO not sent";
  uint8_t challenge_bytes[tcp::kChallengeBytes];
  if (::recv(fd, challenge_bytes, sizeof challenge_bytes, MSG_WAITALL) != sizeof challenge_bytes)
    return "no CHALLENGE";
  tcp::Challenge challenge;
  std::string why;
  if (!tcp::decode_challenge(challenge_bytes, &challenge, &why)) return why;
  tcp::AuthAnswer answer;
  answer.has_token = !token.empty();
  if (answer.has_token) {
    answer.nonce.fill(0x5a);
    if (!auth::compute_mac(token, challenge.nonce, answer.nonce, auth::Role::kClient, &answer.mac).ok())
      return "no MAC";
  }
  std::vector<uint8_t> out(tcp::kAuthBytes);
  tcp::encode_auth(answer, out.data());
  out.insert(out.end(), trailing.begin(), trailing.end());
  if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) return "AUTH not sent";
  uint8_t ack_bytes[tcp::kHelloAckBytes];
  if (::recv(fd, ack_bytes, sizeof ack_bytes, MSG_WAITALL) != sizeof ack_bytes) return "closed before HELLO_ACK";
  tcp::HelloAck ack;
  if (!tcp::decode_hello_ack(ack_bytes, &ack, &why)) return why;
  if (answer.has_token && !auth::verify_mac(token, challenge.nonce, answer.nonce, auth::Role::kServer, ack.mac))
    return "rank 0's MAC is wrong";
  return "";
}

class FakePeer {
 public:
  // Publishes a dummy address for rank 1 and hands rank 0's real one to the test.
  class Exchange : public transport::Bootstrap {
   public:
    Status allgather(const std::string&, const std::vector<uint8_t>& mine, std::vector<std::vector<uint8_t>>* all,
                     Deadline) override {
      {
        std::lock_guard<std::mutex> lock(mu);
        address.assign(mine.begin(), mine.end());
      }
      cv.notify_all();
      std::string dummy = "127.0.0.1:9";
      *all = {mine, std::vector<uint8_t>(dummy.begin(), dummy.end())};
      return Status::Ok();
    }
    std::mutex mu;
    std::condition_variable cv;
    std::string address;
  };

  // Creates rank 0 (with `rank0_token`) while connecting to it as rank 1 (one socket per
  // peer). First each of `intruders` tries: a connection that answers the challenge with that
  // token and then sends `intruder_bytes`; their outcomes go to intruder_results. Then the
  // peer itself connects with `token`.
  Status start(uint64_t comm_id, const std::string& rank0_token = "", const std::string& token = "",
               const std::vector<std::string>& intruders = {}, const std::vector<uint8_t>& intruder_bytes = {}) {
    TcpTransportParams params;
    params.rank = 0;
    params.size = 2;
    params.comm_id = comm_id;
    params.sockets_per_peer = 1;
    params.bootstrap = &exchange_;
    params.describe = describe_op;
    params.deadline = Deadline::after_ms(5000);
    params.job_token = rank0_token;
    Status created;
    std::thread creator([&] { created = create_tcp_transport(params, &rank0); });
    std::string address;
    {
      std::unique_lock<std::mutex> lock(exchange_.mu);
      exchange_.cv.wait(lock, [&] { return !exchange_.address.empty(); });
      address = exchange_.address;
    }
    tcp::Hello hello;
    hello.comm_id = comm_id;
    hello.src_rank = 1;
    hello.dst_rank = 0;
    hello.socket_index = 0;
    hello.sockets_per_peer = 1;
    for (const std::string& intruder : intruders) {
      int intruder_fd = connect_to(address);
      intruder_results.push_back(intruder_fd < 0 ? "no connection"
                                                 : fake_handshake(intruder_fd, hello, intruder, intruder_bytes));
      if (intruder_fd >= 0) ::close(intruder_fd);
    }
    fd = connect_to(address);
    handshake = fd < 0 ? "no connection" : fake_handshake(fd, hello, token);
    creator.join();
    if (!handshake.empty()) return make_status(COLLX_ERR_SYSTEM, "fake peer could not connect: %s", handshake.c_str());
    return created;
  }
  ~FakePeer() {
    if (fd >= 0) ::close(fd);
  }
  void send_frame(const tcp::FrameHeader& h, const void* payload = nullptr, size_t bytes = 0) {
    uint8_t header[tcp::kFrameHeaderBytes];
    tcp::encode_frame_header(h, header);
    ASSERT_EQ(::send(fd, header, sizeof header, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof header));
    if (bytes > 0) {
      ASSERT_EQ(::send(fd, payload, bytes, MSG_NOSIGNAL), static_cast<ssize_t>(bytes));
    }
  }
  void send_raw(const void* data, size_t bytes) {
    ASSERT_EQ(::send(fd, data, bytes, MSG_NOSIGNAL), static_cast<ssize_t>(bytes));
  }

  std::unique_ptr<TcpTransport> rank0;
  int fd = -1;
  std::string handshake;                     // "" when the peer's own handshake succeeded
  std::vector<std::string> intruder_results;  // "" = an intruder was accepted (a failure)

 private:
  static int connect_to(const std::string& address) {
    tcp::SocketAddress a;
    if (!tcp::parse_address(address, &a).ok()) return -1;
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, a.sa(), a.length) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  Exchange exchange_;
};

inline tcp::FrameHeader data_frame(uint64_t msg_id, uint64_t bytes) {
  tcp::FrameHeader h;
  h.type = tcp::FrameType::kData;
  h.src_rank = 1;
  h.tag = 5;
  h.msg_id = msg_id;
  h.msg_bytes = bytes;
  h.frag_bytes = static_cast<uint32_t>(bytes);
  return h;
}

inline Status receive_from_fake(FakePeer& fake, size_t bytes, std::vector<uint8_t>* out = nullptr) {
  std::vector<uint8_t> buf(bytes);
  Request recv;
  COLLX_RETURN_IF_ERROR(fake.rank0->post_recv(&recv, 1, 5, buf.data(), bytes, p2p_desc()));
  Request* list[] = {&recv};
  Status s = fake.rank0->wait_all(list, 1, Deadline::after_ms(3000));
  // `recv` and `buf` end here: the engine must not keep them listed (a timeout leaves them so).
  if (!recv.done()) fake.rank0->cancel(list, 1);
  if (out) *out = buf;
  return s;
}

}  // namespace tcp_test
}  // namespace collx
