// Rank 0 and a store already listening on its address: it joins a store no rank 0 hosts (a
// launcher's, a user's), and refuses, naming the address and the fix, one that rank 0 of
// another job hosts, since joining it would merge the two jobs.
#include "lib/core/store_bootstrap.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace collx {
namespace {

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }

std::unique_ptr<TcpStoreServer> start_server() {
  std::unique_ptr<TcpStoreServer> server;
  Status status = start_tcp_store_server("127.0.0.1:0", &server);
  EXPECT_TRUE(status.ok()) << status.message();
  return server;
}

std::string address_of(const TcpStoreServer& server) { return "127.0.0.1:" + std::to_string(server.port()); }

TEST(StoreBootstrapTest, RankZeroJoinsAStoreNoRankZeroHosts) {
  auto launcher_store = start_server();  // as collx-run hosts its ranks' store
  ASSERT_TRUE(launcher_store);
  std::shared_ptr<Store> store;
  Status status = open_tcp_store(address_of(*launcher_store), 0, Deadline::after_ms(10000), &store);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(store->set("k", bytes_of("v")).ok());
  std::shared_ptr<Store> other;
  ASSERT_TRUE(launcher_store->connect(Deadline::after_ms(10000), &other).ok());
  Bytes value;
  ASSERT_TRUE(other->get("k", &value, Deadline::after_ms(5000)).ok());
  EXPECT_EQ(value, bytes_of("v"));
}

TEST(StoreBootstrapTest, RankZeroRefusesAStoreAnotherJobsRankZeroHosts) {
  auto foreign = start_server();
  ASSERT_TRUE(foreign);
  std::shared_ptr<Store> foreign_rank0;
  ASSERT_TRUE(foreign->connect(Deadline::after_ms(10000), &foreign_rank0).ok());
  ASSERT_TRUE(mark_store_hosted(foreign_rank0.get()).ok());  // what that job's rank 0 did
  std::shared_ptr<Store> store;
  Status status = open_tcp_store(address_of(*foreign), 0, Deadline::after_ms(10000), &store);
  EXPECT_EQ(status.code(), COLLX_ERR_INVALID_USAGE) << status.message();
  EXPECT_FALSE(store);
  EXPECT_NE(status.message().find(address_of(*foreign)), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("rank 0 of another job"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("pid "), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("COLLX_STORE_ADDR"), std::string::npos) << status.message();
  // Other ranks cannot tell and join, as before: only rank 0 knows it did not host it.
  ASSERT_TRUE(open_tcp_store(address_of(*foreign), 1, Deadline::after_ms(10000), &store).ok());
}

TEST(StoreBootstrapTest, RankZeroMarksTheStoreItHostsAndReusesIt) {
  int port = 0;
  {
    auto probe = start_server();  // a port that is free once the probe is gone
    ASSERT_TRUE(probe);
    port = probe->port();
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::shared_ptr<Store> first;
  Status status = open_tcp_store(address, 0, Deadline::after_ms(10000), &first);
  ASSERT_TRUE(status.ok()) << status.message();
  Bytes host;
  ASSERT_TRUE(first->get(kStoreHostKey, &host, Deadline::after_ms(5000)).ok());
  EXPECT_EQ(std::string(host.begin(), host.end()).rfind("pid ", 0), 0u);
  // A second communicator of this process reuses its own store rather than refusing it.
  std::shared_ptr<Store> second;
  status = open_tcp_store(address, 0, Deadline::after_ms(10000), &second);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_TRUE(first->set("shared", bytes_of("yes")).ok());
  Bytes value;
  ASSERT_TRUE(second->get("shared", &value, Deadline::after_ms(5000)).ok());
}

TEST(StoreBootstrapTest, HostingProcessKnowsItHostsTheStore) {
  int port = 0;
  {
    auto probe = start_server();
    ASSERT_TRUE(probe);
    port = probe->port();
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  EXPECT_FALSE(hosts_tcp_store(address));
  std::shared_ptr<Store> store;
  ASSERT_TRUE(open_tcp_store(address, 0, Deadline::after_ms(10000), &store).ok());
  EXPECT_TRUE(hosts_tcp_store(address));
  // A store this process only joined is not its to keep up.
  auto foreign = start_server();
  ASSERT_TRUE(foreign);
  std::shared_ptr<Store> joined;
  ASSERT_TRUE(open_tcp_store(address_of(*foreign), 1, Deadline::after_ms(10000), &joined).ok());
  EXPECT_FALSE(hosts_tcp_store(address_of(*foreign)));
}

// What destroy waits for in the process hosting the store: a rank that has not yet called
// cleanup() (still reading its peers' keys) keeps the wait going until it does.
TEST(StoreBootstrapTest, WaitUntilCleanedEndsWhenTheLastRankArrives) {
  std::shared_ptr<Store> store = make_memory_store();
  StoreBootstrap rank0(store, "collx/w0", 0, 3), rank1(store, "collx/w0", 1, 3), rank2(store, "collx/w0", 2, 3);
  // Nobody arrived yet and no key exists: nothing to wait for (a world that never bootstrapped here).
  EXPECT_TRUE(StoreBootstrap::wait_until_cleaned(store.get(), "collx/w0", 3, Deadline::after_ms(0)).ok());
  ASSERT_TRUE(rank0.cleanup().ok());
  ASSERT_TRUE(rank1.cleanup().ok());
  Status st = StoreBootstrap::wait_until_cleaned(store.get(), "collx/w0", 3, Deadline::after_ms(30));
  EXPECT_EQ(st.code(), COLLX_ERR_TIMEOUT) << st.message();
  EXPECT_NE(st.message().find("2 of 3 ranks finished bootstrapping 'collx/w0'"), std::string::npos) << st.message();
  std::thread straggler([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(rank2.cleanup().ok());
  });
  const auto start = std::chrono::steady_clock::now();
  st = StoreBootstrap::wait_until_cleaned(store.get(), "collx/w0", 3, Deadline::after_ms(10000));
  const auto waited = std::chrono::steady_clock::now() - start;
  straggler.join();
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_LT(waited, std::chrono::seconds(5));  // ended by the arrival, not by the deadline
  Bytes value;
  EXPECT_EQ(store->get("collx/w0/done", &value, Deadline::after_ms(0)).code(), COLLX_ERR_TIMEOUT);
}

}  // namespace
}  // namespace collx
