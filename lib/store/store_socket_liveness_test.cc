// Store connections carry the keepalive and user timeout of COLLX_TCP_KEEPALIVE_* and
// COLLX_TCP_USER_TIMEOUT_MS (COLLX_TCP_UNACKED_TIMEOUT_MS when that is 0) at both ends (the
// server's accepted sockets inherit them from its listener), and a malformed value fails the
// store with a message naming it.
#include <gtest/gtest.h>

#include "lib/store/store_socket.h"
#include "lib/store/tcp_store_test_helpers.h"
#include "tests/support/scoped_env.h"
#include "tests/support/socket_options.h"

namespace collx {
namespace {

// Starts a server and a client with the settings in the environment and checks both ends of
// their connection against `want`.
void expect_store_connection_carries(const testing::ObservedLiveness& want) {
  const std::vector<int> before = testing::connected_tcp_sockets();
  auto server = store_testing::start_server();
  ASSERT_NE(server, nullptr);
  auto client = store_testing::connect_client(server.get());
  ASSERT_NE(client, nullptr);
  store_testing::expect_store_works(client.get(), "liveness");  // the server has accepted by now
  int checked = 0;
  EXPECT_EQ(testing::liveness_mismatches(before, want, &checked), "") << "expected " << want.text();
  EXPECT_GE(checked, 2) << "the client's connection and the server's end of it";
}

TEST(StoreSocketLiveness, ServerAndClientConnectionsCarryTheConfiguredOptions) {
  testing::ScopedEnv idle("COLLX_TCP_KEEPALIVE_IDLE_S", "8");
  testing::ScopedEnv interval("COLLX_TCP_KEEPALIVE_INTERVAL_S", "2");
  testing::ScopedEnv count("COLLX_TCP_KEEPALIVE_COUNT", "5");
  testing::ScopedEnv user("COLLX_TCP_USER_TIMEOUT_MS", "11000");
  expect_store_connection_carries(testing::ObservedLiveness{1, 8, 2, 5, 11000});
}

TEST(StoreSocketLiveness, WithoutAUserTimeoutTheUnacknowledgedWindowIsTheStoresUserTimeout) {
  testing::ScopedEnv user("COLLX_TCP_USER_TIMEOUT_MS", "0");
  testing::ScopedEnv unacked("COLLX_TCP_UNACKED_TIMEOUT_MS", "13000");
  expect_store_connection_carries(testing::ObservedLiveness{1, 10, 5, 3, 13000});
}

TEST(StoreSocketLiveness, AMalformedSettingFailsListenAndConnectNamingIt) {
  testing::ScopedEnv user("COLLX_TCP_USER_TIMEOUT_MS", "soon");
  HostPort where{"127.0.0.1", 0};
  UniqueFd fd;
  int port = 0;
  Status st = listen_tcp(where, &fd, &port, nullptr);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("COLLX_TCP_USER_TIMEOUT_MS"), std::string::npos) << st.message();
  st = connect_tcp("127.0.0.1:1", Deadline::after_ms(1000), &fd);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("COLLX_TCP_USER_TIMEOUT_MS"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace collx
