// The job token on the TCP transport: with the same token on every rank the mesh connects
// and carries data; a connection with a wrong token or none is dropped during the handshake,
// whatever well-formed frames it sends behind its answer, and nothing it sent reaches a user
// buffer (the real peer's message arrives intact afterwards); a token on one side only is an
// error that says so.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "lib/common/auth.h"
#include "transports/tcp/tcp_fake_peer.h"
#include "transports/tcp/tcp_test_harness.h"

namespace collx {
namespace tcp_test {
namespace {

constexpr const char* kToken = "job-token-7e21";

bool skip_without_openssl() { return !auth::available(); }

TEST(TcpAuth, SameTokenOnEveryRankConnectsAndCarriesData) {
  if (skip_without_openssl()) GTEST_SKIP() << "built without OpenSSL";
  Cluster c;
  ASSERT_OK(make_cluster(3, &c, [](int, TcpTransportParams& p) { p.job_token = kToken; }));
  run_ranks(3, [&](int r) {
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    std::vector<uint8_t> out = pattern(70000, r), in(70000);
    Request send, recv;
    ASSERT_OK(c[r].post_recv(&recv, prev, 1, in.data(), in.size(), p2p_desc()));
    ASSERT_OK(c[r].post_send(&send, next, 1, out.data(), out.size(), p2p_desc()));
    Request* both[] = {&send, &recv};
    ASSERT_OK(c[r].wait_all(both, 2, Deadline::after_ms(10000)));
    EXPECT_TRUE(in == pattern(70000, prev));
  });
}

// Intruders with a wrong token and with none answer rank 0's challenge and send a well-formed
// DATA frame for the tag rank 0 will receive on; both are dropped. Then the real rank 1 joins
// and its message is the one that lands in the buffer.
TEST(TcpAuth, WrongOrMissingTokenCannotJoinOrInject) {
  if (skip_without_openssl()) GTEST_SKIP() << "built without OpenSSL";
  std::vector<uint8_t> injected(tcp::kFrameHeaderBytes + 8, 0xEE);
  tcp::encode_frame_header(data_frame(1, 8), injected.data());
  FakePeer fake;
  ASSERT_OK(fake.start(next_comm_id(), kToken, kToken, {"wrong-token", ""}, injected));
  ASSERT_EQ(fake.intruder_results.size(), 2u);
  for (const std::string& result : fake.intruder_results) EXPECT_NE(result, "") << "an intruder was accepted";

  std::vector<uint8_t> message = pattern(8, 3);
  fake.send_frame(data_frame(1, 8), message.data(), message.size());
  std::vector<uint8_t> received;
  ASSERT_OK(receive_from_fake(fake, 8, &received));
  EXPECT_TRUE(received == message) << "bytes from an unauthenticated connection reached the buffer";
  EXPECT_OK(fake.rank0->health());
}

// Two ranks where only `token_rank` has the token: the statuses of both.
std::vector<Status> one_sided(int token_rank) {
  auto board = std::make_shared<Board>(2);
  std::vector<std::unique_ptr<BoardBootstrap>> bootstraps;
  for (int r = 0; r < 2; ++r) bootstraps.push_back(std::make_unique<BoardBootstrap>(board, r));
  std::vector<Status> statuses(2);
  std::vector<std::unique_ptr<TcpTransport>> t(2);
  const uint64_t comm_id = next_comm_id();
  const Deadline deadline = Deadline::after_ms(1500);
  run_ranks(2, [&](int r) {
    TcpTransportParams params;
    params.rank = r;
    params.size = 2;
    params.comm_id = comm_id;
    params.bootstrap = bootstraps[r].get();
    params.deadline = deadline;
    params.job_token = r == token_rank ? kToken : "";
    statuses[r] = create_tcp_transport(params, &t[r]);
  });
  return statuses;
}

// The connecting rank (1) is told what is wrong; the accepting one drops the connection
// with a warning and times out naming the missing peer.
TEST(TcpAuth, TokenOnOneSideOnlyIsReportedClearly) {
  if (skip_without_openssl()) GTEST_SKIP() << "built without OpenSSL";
  std::vector<Status> only_rank0 = one_sided(0);
  EXPECT_EQ(only_rank0[1].code(), COLLX_ERR_PROTOCOL);
  EXPECT_NE(only_rank0[1].message().find("requires the job token"), std::string::npos) << only_rank0[1].message();
  EXPECT_FALSE(only_rank0[0].ok());
  std::vector<Status> only_rank1 = one_sided(1);
  EXPECT_EQ(only_rank1[1].code(), COLLX_ERR_PROTOCOL);
  EXPECT_NE(only_rank1[1].message().find("uses no job token"), std::string::npos) << only_rank1[1].message();
  EXPECT_FALSE(only_rank1[0].ok());
}

// A peer speaking the previous wire version is told so, token or not.
TEST(TcpAuth, WireVersionMismatchIsStillReported) {
  uint8_t hello[tcp::kHelloBytes];
  tcp::encode_hello(tcp::Hello(), hello);
  hello[4] = 1;  // version 1: no job token exchange
  tcp::Hello out;
  std::string why;
  EXPECT_FALSE(tcp::decode_hello(hello, &out, &why));
  EXPECT_NE(why.find("wire version 1"), std::string::npos) << why;
}

// COLLX_REQUIRE_TOKEN=1: a transport without a token is an error naming the rank and the fix,
// before anything listens; with a token it is created as usual.
TEST(TcpAuth, RequireTokenRefusesATransportWithoutOne) {
  TcpTransportParams params;
  params.rank = 0;
  params.size = 1;
  params.deadline = Deadline::after_ms(5000);
  ::setenv("COLLX_REQUIRE_TOKEN", "1", 1);
  std::unique_ptr<TcpTransport> transport;
  Status without = create_tcp_transport(params, &transport);
  Status with = Status::Ok();
  if (!skip_without_openssl()) {
    params.job_token = kToken;
    std::unique_ptr<TcpTransport> tokened;
    with = create_tcp_transport(params, &tokened);
  }
  ::unsetenv("COLLX_REQUIRE_TOKEN");
  EXPECT_EQ(without.code(), COLLX_ERR_INVALID_USAGE) << without.message();
  EXPECT_FALSE(transport);
  EXPECT_NE(without.message().find("TCP transport of rank 0: COLLX_REQUIRE_TOKEN=1"), std::string::npos)
      << without.message();
  EXPECT_TRUE(with.ok()) << with.message();
}

}  // namespace
}  // namespace tcp_test
}  // namespace collx
