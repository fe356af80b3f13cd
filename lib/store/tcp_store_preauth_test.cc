// What a TCP store server with a job token lets a connection that has not authenticated do,
// in numbers: hold at most StoreHandshake::kMaxInputBytes of its input, stay at most the
// handshake timeout, and be one of at most max_handshaking_connections. Also: the store's
// key and byte caps, memory running out while serving one connection, COLLX_REQUIRE_TOKEN,
// and the warning for a store without a token on a non-loopback address. Each test prints
// its figures ("figure: ...") for the record.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "lib/common/auth.h"
#include "lib/store/store_handshake.h"
#include "lib/store/tcp_store_test_helpers.h"

namespace collx {
namespace store_testing {
namespace {

constexpr const char* kToken = "job-preauth-secret";

std::unique_ptr<TcpStoreServer> start_with(const TcpStoreServerOptions& options) {
  std::unique_ptr<TcpStoreServer> server;
  Status status = start_tcp_store_server("127.0.0.1:0", options, &server);
  EXPECT_TRUE(status.ok()) << status.message();
  return server;
}

TcpStoreServerOptions token_options() {
  TcpStoreServerOptions options;
  options.job_token = kToken;
  return options;
}

// Polls the server's counters until `done` holds (the server thread updates them), up to 10 s.
template <typename Done>
bool counters_reach(TcpStoreServer* server, Done done) {
  for (int i = 0; i < 1000; ++i) {
    if (done(server->counters())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class PreAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!auth::available()) GTEST_SKIP() << "built without OpenSSL: no job token";
  }
  Status connect_good(TcpStoreServer* server, std::shared_ptr<Store>* out) {
    return connect_tcp_store("127.0.0.1:" + std::to_string(server->port()), kToken, Deadline::after_ms(10000), out);
  }
};

// A stranger announces a SET of almost 64 MiB and streams 4 MiB of it: the server refuses it
// from the header and never holds more than the handshake's few bytes.
TEST_F(PreAuthTest, LargeFrameBeforeAuthIsRefusedFromItsHeader) {
  auto server = start_with(token_options());
  RawClient raw(server->port());
  Request set = make_request(Opcode::kSet, 1, "k");
  set.value.assign(1000, 'x');
  Bytes frame = frame_of(set);
  const uint32_t claimed = static_cast<uint32_t>(kStoreMaxValueBytes);  // body length field
  for (int i = 0; i < 4; ++i) frame[12 + i] = static_cast<uint8_t>(claimed >> (8 * i));
  frame.resize(kHeaderBytes);
  const Bytes body(64 << 10, 'x');
  frame.insert(frame.end(), body.begin(), body.end());
  raw.send_bytes(frame);
  Bytes received;
  ASSERT_TRUE(raw.read_until_closed(&received));
  size_t sent = body.size();
  for (int i = 0; i < 64 && raw.try_send(body); ++i) sent += body.size();
  Reply reply;
  size_t frame_bytes = 0;
  ASSERT_TRUE(decode_reply(received.data(), received.size(), &reply, &frame_bytes).ok());
  EXPECT_EQ(reply.status, COLLX_ERR_PROTOCOL);
  EXPECT_NE(reply.message.find("SET before authenticating"), std::string::npos) << reply.message;
  const TcpStoreServerCounters counters = server->counters();
  EXPECT_EQ(counters.refused_handshakes, 1u);
  EXPECT_GT(counters.max_unauthenticated_input_bytes, 0u);
  EXPECT_LE(counters.max_unauthenticated_input_bytes, StoreHandshake::kMaxInputBytes);
  std::printf("figure: frame announced %u bytes, client sent %zu body bytes before the close, server held at most "
              "%llu bytes before auth (cap %zu)\n",
              claimed, sent, static_cast<unsigned long long>(counters.max_unauthenticated_input_bytes),
              StoreHandshake::kMaxInputBytes);
}

TEST_F(PreAuthTest, ConnectionsBeyondTheHandshakeCapAreRefused) {
  TcpStoreServerOptions options = token_options();
  options.max_handshaking_connections = 4;
  options.handshake_timeout_ms = 120000;  // only the cap is at work here
  auto server = start_with(options);
  std::vector<std::unique_ptr<RawClient>> silent;
  for (int i = 0; i < 4; ++i) silent.push_back(std::make_unique<RawClient>(server->port()));
  ASSERT_TRUE(counters_reach(server.get(), [](const TcpStoreServerCounters& c) { return c.handshaking_connections == 4; }));
  constexpr int kExtra = 6;
  for (int i = 0; i < kExtra; ++i) {
    RawClient extra(server->port());
    Bytes received;
    EXPECT_TRUE(extra.read_until_closed(&received)) << "connection " << i << " beyond the cap was kept";
    EXPECT_TRUE(received.empty());
  }
  TcpStoreServerCounters counters = server->counters();
  EXPECT_EQ(counters.refused_connections, static_cast<uint64_t>(kExtra));
  EXPECT_EQ(counters.handshaking_connections, 4u);
  std::printf("figure: cap 4 handshaking connections; %d more attempted, %llu refused, %llu kept\n", kExtra,
              static_cast<unsigned long long>(counters.refused_connections),
              static_cast<unsigned long long>(counters.handshaking_connections));
  // The job's own client is refused too while strangers fill the cap: it retries until its
  // deadline ...
  std::shared_ptr<Store> good;
  Status status = connect_tcp_store("127.0.0.1:" + std::to_string(server->port()), kToken, Deadline::after_ms(300),
                                    &good);
  EXPECT_EQ(status.code(), COLLX_ERR_TIMEOUT) << status.message();
  EXPECT_NE(status.message().find("closed every connection before answering"), std::string::npos)
      << status.message();
  EXPECT_GT(server->counters().refused_connections, static_cast<uint64_t>(kExtra));
  // ... and gets in once one of them leaves, even while it is already retrying; an
  // authenticated client no longer counts.
  std::thread leave([&silent] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    silent.pop_back();
  });
  status = connect_good(server.get(), &good);
  leave.join();
  ASSERT_TRUE(status.ok()) << status.message();
  expect_store_works(good.get(), "after the cap freed");
  EXPECT_EQ(server->counters().handshaking_connections, 3u);
}

TEST_F(PreAuthTest, SilentConnectionIsDroppedAtTheHandshakeDeadline) {
  TcpStoreServerOptions options = token_options();
  options.handshake_timeout_ms = 300;
  auto server = start_with(options);
  std::shared_ptr<Store> good;
  ASSERT_TRUE(connect_good(server.get(), &good).ok());  // authenticated in time: kept
  const auto start = std::chrono::steady_clock::now();
  RawClient silent(server->port());
  RawClient hello_only(server->port());
  hello_only.send_bytes(frame_of(make_request(Opcode::kHello, 1)));
  Reply hello;
  ASSERT_TRUE(hello_only.read_reply(&hello));
  Bytes received;
  ASSERT_TRUE(silent.read_until_closed(&received));
  const int64_t silent_ms = elapsed_ms_since(start);
  EXPECT_TRUE(received.empty());
  ASSERT_TRUE(hello_only.read_until_closed(&received));
  EXPECT_GE(silent_ms, 300);
  EXPECT_EQ(server->counters().handshake_timeouts, 2u);
  EXPECT_EQ(server->counters().handshaking_connections, 0u);
  expect_store_works(good.get(), "after the deadline");
  std::printf("figure: handshake timeout 300 ms; silent connection dropped after %lld ms\n",
              static_cast<long long>(silent_ms));
}

TEST_F(PreAuthTest, SecondHelloBeforeAuthIsRefused) {
  auto server = start_with(token_options());
  RawClient raw(server->port());
  raw.send_bytes(frame_of(make_request(Opcode::kHello, 1)));
  Reply hello;
  ASSERT_TRUE(raw.read_reply(&hello));
  raw.send_bytes(frame_of(make_request(Opcode::kHello, 2)));
  Reply reply;
  ASSERT_TRUE(raw.read_final_reply(&reply));
  EXPECT_EQ(reply.status, COLLX_ERR_PROTOCOL);
  EXPECT_NE(reply.message.find("HELLO sent twice"), std::string::npos) << reply.message;
}

TEST(TcpStoreLimitsTest, InjectedAllocationFailureDropsOnlyThatConnection) {
  std::atomic<bool> fail_next{false};
  TcpStoreServerOptions options;
  options.before_request = [&fail_next] {
    if (fail_next.exchange(false)) throw std::bad_alloc();
  };
  auto server = start_with(options);
  auto victim = connect_client(server.get());
  auto bystander = connect_client(server.get());
  ASSERT_TRUE(victim && bystander);
  ASSERT_TRUE(bystander->set("kept", bytes_of("v")).ok());
  fail_next = true;
  Status status = victim->set("lost", bytes_of("v"));
  EXPECT_EQ(status.code(), COLLX_ERR_REMOTE) << status.message();
  EXPECT_EQ(server->counters().allocation_failures, 1u);
  Bytes value;
  ASSERT_TRUE(bystander->get("kept", &value, Deadline::after_ms(5000)).ok());
  EXPECT_EQ(bystander->get("lost", &value, Deadline::after_ms(0)).code(), COLLX_ERR_TIMEOUT);
  expect_store_works(connect_client(server.get()).get(), "new client");
  std::printf("figure: 1 injected allocation failure: 1 connection dropped, the server and its other clients "
              "kept serving\n");
}

TEST(TcpStoreLimitsTest, KeyCapGivesAClearError) {
  TcpStoreServerOptions options;
  options.max_keys = 3;
  auto server = start_with(options);
  auto store = connect_client(server.get());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->set("k" + std::to_string(i), bytes_of("v")).ok());
  ASSERT_TRUE(store->set("k0", bytes_of("replaced")).ok());  // replacing needs no new key
  Status status = store->set("k3", bytes_of("v"));
  EXPECT_EQ(status.code(), COLLX_ERR_NO_MEMORY);
  EXPECT_NE(status.message().find("COLLX_STORE_MAX_KEYS"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("'k3'"), std::string::npos) << status.message();
  int64_t counter = 0;
  EXPECT_EQ(store->add("n", 1, &counter).code(), COLLX_ERR_NO_MEMORY);
  ASSERT_TRUE(store->remove("k1").ok());
  EXPECT_TRUE(store->add("n", 1, &counter).ok());  // room again
  std::printf("figure: cap 3 keys: the 4th key refused with COLLX_ERR_NO_MEMORY: %s\n", status.message().c_str());
}

TEST(TcpStoreLimitsTest, ByteCapGivesAClearError) {
  TcpStoreServerOptions options;
  options.max_bytes = 1000;
  auto server = start_with(options);
  auto store = connect_client(server.get());
  ASSERT_TRUE(store->set("a", Bytes(600, 1)).ok());
  Status status = store->set("b", Bytes(600, 2));
  EXPECT_EQ(status.code(), COLLX_ERR_NO_MEMORY);
  EXPECT_NE(status.message().find("COLLX_STORE_MAX_BYTES"), std::string::npos) << status.message();
  Bytes current;
  EXPECT_EQ(store->compare_set("b", Bytes(), Bytes(600, 2), &current).code(), COLLX_ERR_NO_MEMORY);
  ASSERT_TRUE(store->set("a", Bytes(300, 1)).ok());  // shrinking frees room
  EXPECT_TRUE(store->set("b", Bytes(600, 2)).ok());
  std::printf("figure: cap 1000 bytes: a second 600-byte value refused: %s\n", status.message().c_str());
}

TEST(TcpStoreLimitsTest, LimitsComeFromTheSettings) {
  ::setenv("COLLX_STORE_MAX_KEYS", "2", 1);
  ::setenv("COLLX_STORE_MAX_BYTES", "64K", 1);
  TcpStoreServerOptions options;
  Status status = tcp_store_server_options_from_settings(&options);
  ::setenv("COLLX_STORE_MAX_KEYS", "0", 1);
  TcpStoreServerOptions zero;
  Status zero_status = tcp_store_server_options_from_settings(&zero);
  ::unsetenv("COLLX_STORE_MAX_KEYS");
  ::unsetenv("COLLX_STORE_MAX_BYTES");
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(options.max_keys, 2u);
  EXPECT_EQ(options.max_bytes, 64u << 10);
  EXPECT_EQ(zero_status.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(zero_status.message().find("COLLX_STORE_MAX_KEYS=0"), std::string::npos) << zero_status.message();
}

TEST(TcpStoreLimitsTest, RequireTokenMakesATokenlessStoreAnError) {
  auto open_server = start_server();  // before the setting: no token
  ASSERT_TRUE(open_server);
  ::setenv("COLLX_REQUIRE_TOKEN", "1", 1);
  std::unique_ptr<TcpStoreServer> server;
  Status serve = start_tcp_store_server("127.0.0.1:0", "", &server);
  std::shared_ptr<Store> store;
  Status join = connect_tcp_store("127.0.0.1:" + std::to_string(open_server->port()), "", Deadline::after_ms(5000),
                                  &store);
  ::unsetenv("COLLX_REQUIRE_TOKEN");
  EXPECT_EQ(serve.code(), COLLX_ERR_INVALID_USAGE);
  EXPECT_FALSE(server);
  EXPECT_NE(serve.message().find("COLLX_REQUIRE_TOKEN=1"), std::string::npos) << serve.message();
  EXPECT_NE(serve.message().find("store server at 127.0.0.1:0"), std::string::npos) << serve.message();
  EXPECT_EQ(join.code(), COLLX_ERR_INVALID_USAGE);
  EXPECT_NE(join.message().find("COLLX_JOB_TOKEN"), std::string::npos) << join.message();
}

// The only test of this executable that binds a non-loopback address (the warning is once per
// process).
TEST(TcpStoreLimitsTest, NonLoopbackStoreWithoutTokenWarnsOnce) {
  CapturedLog log;
  auto first = start_server("0.0.0.0:0");
  auto second = start_server("0.0.0.0:0");
  auto loopback = start_server("127.0.0.1:0");
  ASSERT_TRUE(first && second && loopback);
  const std::string text = log.text();
  const std::string warning = "without a job token";
  const size_t at = text.find(warning);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.find(warning, at + 1), std::string::npos) << "warned more than once:\n" << text;
  EXPECT_NE(text.find("0.0.0.0:" + std::to_string(first->port())), std::string::npos) << text;
  EXPECT_NE(text.find("COLLX_JOB_TOKEN"), std::string::npos) << text;
}

}  // namespace
}  // namespace store_testing
}  // namespace collx
