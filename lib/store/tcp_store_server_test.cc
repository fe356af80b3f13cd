// The TCP store server: addresses, many clients, and clients that send garbage, stall
// mid-frame, pipeline or leave while waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lib/store/tcp_store_test_helpers.h"

namespace collx {
namespace store_testing {
namespace {

TEST(TcpStoreServerTest, PortZeroPicksAFreePortAndReportsIt) {
  auto server = start_server();
  ASSERT_TRUE(server);
  ASSERT_GT(server->port(), 0);
  std::shared_ptr<Store> by_address;
  Status status = connect_tcp_store("127.0.0.1:" + std::to_string(server->port()), Deadline::after_ms(5000), &by_address);
  ASSERT_TRUE(status.ok()) << status.message();
  auto other = connect_client(server.get());
  ASSERT_TRUE(by_address->set("k", bytes_of("v")).ok());
  Bytes value;
  ASSERT_TRUE(other->get("k", &value, Deadline::after_ms(5000)).ok());
  EXPECT_EQ(text_of(value), "v");
}

TEST(TcpStoreServerTest, StarAndZeroAddressesListenOnEveryInterface) {
  for (const char* address : {"*:0", "0.0.0.0:0"}) {
    auto server = start_server(address);
    ASSERT_TRUE(server) << address;
    auto store = connect_client(server.get());  // through loopback
    ASSERT_TRUE(store);
    expect_store_works(store.get(), address);
    // By host name: getaddrinfo may list ::1 first, which this IPv4 server refuses.
    std::shared_ptr<Store> by_name;
    Status status = connect_tcp_store("localhost:" + std::to_string(server->port()), Deadline::after_ms(5000), &by_name);
    ASSERT_TRUE(status.ok()) << status.message();
    expect_store_works(by_name.get(), "by-name");
  }
}

TEST(TcpStoreServerTest, BracketedIpv6AddressesWork) {
  std::unique_ptr<TcpStoreServer> server;
  Status status = start_tcp_store_server("[::1]:0", &server);
  if (!status.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << status.message();
  std::shared_ptr<Store> store;
  status = connect_tcp_store("[::1]:" + std::to_string(server->port()), Deadline::after_ms(5000), &store);
  ASSERT_TRUE(status.ok()) << status.message();
  expect_store_works(store.get(), "v6");
}

TEST(TcpStoreServerTest, MalformedAddressesAreInvalidArgs) {
  for (const char* address : {"", "no-port", "host:", ":1234", "::1:1234", "[::1]1234", "[::1", "host:65536",
                              "host:12ab", "host:-1"}) {
    std::unique_ptr<TcpStoreServer> server;
    EXPECT_EQ(start_tcp_store_server(address, &server).code(), COLLX_ERR_INVALID_ARG) << address;
    std::shared_ptr<Store> store;
    Status status = connect_tcp_store(address, Deadline::after_ms(100), &store);
    EXPECT_EQ(status.code(), COLLX_ERR_INVALID_ARG) << address;
    EXPECT_NE(status.message().find(std::string("'") + address + "'"), std::string::npos) << status.message();
  }
}

TEST(TcpStoreServerTest, AddressInUseIsReportedThroughTheOutParameter) {
  auto first = start_server();
  ASSERT_TRUE(first);
  std::unique_ptr<TcpStoreServer> second;
  bool in_use = false;
  Status status = start_tcp_store_server("127.0.0.1:" + std::to_string(first->port()), &second, &in_use);
  EXPECT_EQ(status.code(), COLLX_ERR_SYSTEM);
  EXPECT_TRUE(in_use);
  EXPECT_FALSE(second);
  EXPECT_NE(status.message().find("Address already in use"), std::string::npos) << status.message();
  // A free port is not "in use".
  std::unique_ptr<TcpStoreServer> third;
  in_use = true;
  ASSERT_TRUE(start_tcp_store_server("127.0.0.1:0", &third, &in_use).ok());
  EXPECT_FALSE(in_use);
}

TEST(TcpStoreServerTest, ManyConcurrentClientsAreAllServed) {
  constexpr int kClients = 32;
  auto server = start_server();
  std::vector<std::string> keys;
  for (int i = 0; i < kClients; ++i) keys.push_back("rank/" + std::to_string(i));
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto store = connect_client(server.get());
      ASSERT_TRUE(store);
      ASSERT_TRUE(store->set(keys[i], bytes_of(std::to_string(i))).ok());
      Status status = store->wait(keys, Deadline::after_ms(20000));
      ASSERT_TRUE(status.ok()) << status.message();
      Bytes value;
      ASSERT_TRUE(store->get(keys[(i + 1) % kClients], &value, Deadline::after_ms(5000)).ok());
      EXPECT_EQ(text_of(value), std::to_string((i + 1) % kClients));
      ASSERT_TRUE(store->add("arrived", 1, nullptr).ok());
    });
  }
  for (auto& thread : threads) thread.join();
  auto store = connect_client(server.get());
  Bytes value;
  ASSERT_TRUE(store->get("arrived", &value, Deadline::after_ms(0)).ok());
  EXPECT_EQ(text_of(value), std::to_string(kClients));
}

TEST(TcpStoreServerTest, OneSetReleasesEveryClientWaitingForIt) {
  constexpr int kWaiters = 16;
  auto server = start_server();
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      auto store = connect_client(server.get());
      Status status = store->wait({"go"}, Deadline::after_ms(20000));
      EXPECT_TRUE(status.ok()) << status.message();
      released++;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(released.load(), 0);
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(connect_client(server.get())->set("go", Bytes()).ok());
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(released.load(), kWaiters);
  EXPECT_LT(elapsed_ms_since(start), 2000);
}

struct GarbageCase {
  const char* name;
  const char* reason;  // expected in the server's warning
  Bytes bytes;
  bool close_after_sending;
};

std::vector<GarbageCase> garbage_cases() {
  std::vector<GarbageCase> cases;
  std::mt19937 random(1234);
  Bytes noise(4096);
  for (auto& b : noise) b = static_cast<uint8_t>(random());
  noise[0] = 0x00;  // never a valid magic
  cases.push_back({"random bytes", "bad magic", noise, false});

  Bytes huge = frame_of(make_request(Opcode::kSet, 7, "k", "v"));
  for (int i = 12; i < 16; ++i) huge[i] = 0xff;  // body length 4 GiB - 1
  huge.resize(kHeaderBytes);
  cases.push_back({"valid magic with a huge length", "exceeds the limit", huge, false});

  Request long_key = make_request(Opcode::kSet, 8, std::string(kStoreMaxKeyBytes + 1, 'k'), "v");
  cases.push_back({"key longer than the limit", "key of 4097 bytes exceeds the limit", frame_of(long_key), false});

  Bytes truncated = frame_of(make_request(Opcode::kSet, 9, "key", "some value"));
  truncated.resize(truncated.size() - 3);
  cases.push_back({"truncated frame then close", "inside a frame", truncated, true});

  Bytes wrong_version = frame_of(make_request(Opcode::kPing, 10));
  wrong_version[4] = 99;
  cases.push_back({"unknown protocol version", "unsupported store protocol version 99", wrong_version, false});
  return cases;
}

TEST(TcpStoreServerTest, GarbageFromOneClientDropsOnlyThatClient) {
  auto server = start_server();
  auto good = connect_client(server.get());
  expect_store_works(good.get(), "before");
  for (const GarbageCase& garbage : garbage_cases()) {
    SCOPED_TRACE(garbage.name);
    CapturedLog log;
    RawClient raw(server->port());
    const std::string raw_address = raw.local_address();
    raw.send_bytes(garbage.bytes);
    if (garbage.close_after_sending) {
      raw.close();
    } else {
      Bytes received;
      EXPECT_TRUE(raw.read_until_closed(&received)) << "the server kept a misbehaving client";
    }
    expect_store_works(good.get(), std::string("after ") + garbage.name);
    // The warning names the client and the reason (it may be written just after the close).
    std::string text;
    for (int i = 0; i < 100; ++i) {
      text = log.text();
      if (text.find(raw_address) != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_NE(text.find("WARN STORE"), std::string::npos) << text;
    EXPECT_NE(text.find(raw_address), std::string::npos) << text;
    EXPECT_NE(text.find(garbage.reason), std::string::npos) << text;
  }
}

TEST(TcpStoreServerTest, CollxPeerWithABadFrameIsToldWhyBeforeTheClose) {
  auto server = start_server();
  RawClient raw(server->port());
  Bytes wrong_version = frame_of(make_request(Opcode::kPing, 42));
  wrong_version[4] = 99;
  raw.send_bytes(wrong_version);
  Reply reply;
  ASSERT_TRUE(raw.read_final_reply(&reply));
  EXPECT_EQ(reply.request_id, 42u);
  EXPECT_EQ(reply.status, COLLX_ERR_PROTOCOL);
  EXPECT_NE(reply.message.find("version 99"), std::string::npos) << reply.message;
}

TEST(TcpStoreServerTest, SlowPartialFrameDoesNotBlockOtherClients) {
  auto server = start_server();
  RawClient slow(server->port());
  Bytes ping = frame_of(make_request(Opcode::kPing, 5));
  Bytes first_part(ping.begin(), ping.begin() + 10);
  slow.send_bytes(first_part);
  auto good = connect_client(server.get());
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) expect_store_works(good.get(), "while slow " + std::to_string(i));
  EXPECT_LT(elapsed_ms_since(start), 2000);
  // The slow client's frame completes later and is answered.
  slow.send_bytes(Bytes(ping.begin() + 10, ping.end()));
  Reply reply;
  ASSERT_TRUE(slow.read_reply(&reply));
  EXPECT_EQ(reply.opcode, Opcode::kPing);
  EXPECT_EQ(reply.request_id, 5u);
  EXPECT_EQ(reply.status, COLLX_OK);
}

TEST(TcpStoreServerTest, PipelinedRequestsAreAnsweredInOrder) {
  auto server = start_server();
  RawClient raw(server->port());
  Bytes frames;
  for (const Request& request : {make_request(Opcode::kHello, 1), make_request(Opcode::kSet, 2, "k", "v"),
                                 make_request(Opcode::kGet, 3, "k"), make_request(Opcode::kPing, 4)}) {
    Bytes frame = frame_of(request);
    frames.insert(frames.end(), frame.begin(), frame.end());
  }
  raw.send_bytes(frames);
  const Opcode expected[] = {Opcode::kHello, Opcode::kSet, Opcode::kGet, Opcode::kPing};
  for (uint32_t id = 1; id <= 4; ++id) {
    Reply reply;
    ASSERT_TRUE(raw.read_reply(&reply));
    EXPECT_EQ(reply.request_id, id);
    EXPECT_EQ(reply.opcode, expected[id - 1]);
    EXPECT_EQ(reply.status, COLLX_OK) << reply.message;
    if (reply.opcode == Opcode::kHello) {
      EXPECT_EQ(reply.server_version, kProtocolVersion);
    }
    if (reply.opcode == Opcode::kGet) {
      EXPECT_EQ(text_of(reply.value), "v");
    }
  }
}

TEST(TcpStoreServerTest, ServerAnswersAWaitAtItsTimeoutNamingTheFirstMissingKey) {
  auto server = start_server();
  ASSERT_TRUE(connect_client(server.get())->set("here", Bytes()).ok());
  RawClient raw(server->port());
  Request wait;
  wait.opcode = Opcode::kWait;
  wait.request_id = 3;
  wait.keys = {"here", "not/here", "nor/here"};
  wait.timeout_ms = 50;
  auto start = std::chrono::steady_clock::now();
  raw.send_bytes(frame_of(wait));
  Reply reply;
  ASSERT_TRUE(raw.read_reply(&reply));
  const int64_t elapsed = elapsed_ms_since(start);
  EXPECT_EQ(reply.request_id, 3u);
  EXPECT_EQ(reply.status, COLLX_ERR_TIMEOUT);
  EXPECT_EQ(reply.message, "store wait timed out after 50 ms; missing key 'not/here'");
  EXPECT_GE(elapsed, 45);
  EXPECT_LT(elapsed, 1000);
}

TEST(TcpStoreServerTest, ClientLeavingWhileItWaitsIsForgotten) {
  auto server = start_server();
  {
    RawClient raw(server->port());
    Request wait;
    wait.opcode = Opcode::kWait;
    wait.request_id = 1;
    wait.keys = {"never/1", "never/2"};
    wait.timeout_ms = -1;
    raw.send_bytes(frame_of(wait));
    Request get = make_request(Opcode::kGet, 2, "never/3");
    get.timeout_ms = 60000;
    raw.send_bytes(frame_of(get));  // queued behind the wait
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto store = connect_client(server.get());
  for (const char* key : {"never/1", "never/2", "never/3"}) expect_store_works(store.get(), key);
}

}  // namespace
}  // namespace store_testing
}  // namespace collx
