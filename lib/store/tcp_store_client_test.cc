// The TCP store client: connect retries and timeouts, the server going away, and sharing
// one client between threads.
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

TEST(TcpStoreClientTest, ConnectingWhereNothingListensTimesOutNamingTheAddress) {
  const std::string address = "127.0.0.1:" + std::to_string(free_port());
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Store> store;
  Status status = connect_tcp_store(address, Deadline::after_ms(300), &store);
  const int64_t elapsed = elapsed_ms_since(start);
  EXPECT_EQ(status.code(), COLLX_ERR_TIMEOUT) << status.message();
  EXPECT_NE(status.message().find(address), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("Connection refused"), std::string::npos) << status.message();
  EXPECT_GE(elapsed, 280);
  EXPECT_LT(elapsed, 1500);
  EXPECT_FALSE(store);
}

TEST(TcpStoreClientTest, ConnectRetriesUntilTheServerStarts) {
  const int port = free_port();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Status status = start_tcp_store_server(address, &server);
    EXPECT_TRUE(status.ok()) << status.message();
  });
  std::shared_ptr<Store> store;
  Status status = connect_tcp_store(address, Deadline::after_ms(10000), &store);
  starter.join();
  ASSERT_TRUE(status.ok()) << status.message();
  expect_store_works(store.get(), "late server");
}

TEST(TcpStoreClientTest, DestroyedServerFailsClientsWithRemoteNamingTheAddress) {
  auto server = start_server();
  const std::string address = "127.0.0.1:" + std::to_string(server->port());
  auto waiter = connect_client(server.get());
  auto idle = connect_client(server.get());
  expect_store_works(idle.get(), "warm");
  Status waiter_status;
  std::thread blocked([&] {
    Bytes value;
    waiter_status = waiter->get("never", &value, Deadline::never());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto start = std::chrono::steady_clock::now();
  server.reset();
  EXPECT_LT(elapsed_ms_since(start), 1000) << "destroying the server was slow";
  blocked.join();
  EXPECT_LT(elapsed_ms_since(start), 2000) << "the blocked get noticed late";
  EXPECT_EQ(waiter_status.code(), COLLX_ERR_REMOTE) << waiter_status.message();
  EXPECT_NE(waiter_status.message().find(address), std::string::npos) << waiter_status.message();
  Status status = idle->set("after", bytes_of("v"));
  EXPECT_EQ(status.code(), COLLX_ERR_REMOTE) << status.message();
  EXPECT_NE(status.message().find(address), std::string::npos) << status.message();
  // Later calls fail at once rather than waiting for a deadline.
  start = std::chrono::steady_clock::now();
  Bytes value;
  EXPECT_EQ(waiter->get("x", &value, Deadline::never()).code(), COLLX_ERR_REMOTE);
  EXPECT_EQ(idle->add("x", 1, nullptr).code(), COLLX_ERR_REMOTE);
  EXPECT_LT(elapsed_ms_since(start), 1000);
}

TEST(TcpStoreClientTest, ClientStaysUsableAfterATimeout) {
  auto server = start_server();
  auto store = connect_client(server.get());
  Bytes value;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(store->get("missing", &value, Deadline::after_ms(20)).code(), COLLX_ERR_TIMEOUT);
  expect_store_works(store.get(), "after timeouts");
}

TEST(TcpStoreClientTest, ThreadsSharingOneClientDoNotSerializeBehindAWait) {
  auto server = start_server();
  auto store = connect_client(server.get());
  std::vector<std::thread> threads;
  constexpr int kThreads = 8;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      // Thread i waits for the key thread i+1 sets: needs every thread in flight at once.
      ASSERT_TRUE(store->set("t/" + std::to_string((i + 1) % kThreads), Bytes()).ok());
      Status status = store->wait({"t/" + std::to_string(i)}, Deadline::after_ms(10000));
      EXPECT_TRUE(status.ok()) << status.message();
    });
  }
  for (auto& thread : threads) thread.join();
}

}  // namespace
}  // namespace store_testing
}  // namespace collx
