// Every connection of the TCP transport carries keepalive (and the user timeout when one is
// configured; by default none: tcp_unacked.cc), in both directions (sockets it connected and
// sockets it accepted), so a silent peer is noticed without waiting for the deadline (the
// partition itself: tests/launcher/partition_test.sh).
#include <gtest/gtest.h>

#include "tests/support/scoped_env.h"
#include "tests/support/socket_options.h"
#include "transports/tcp/tcp_test_harness.h"

namespace collx {
namespace tcp_test {
namespace {

TEST(TcpKeepalive, EveryConnectionOfTheMeshCarriesTheConfiguredOptions) {
  const int size = 3;
  const std::vector<int> before = testing::connected_tcp_sockets();
  Cluster cluster;
  ASSERT_OK(make_cluster(size, &cluster, [](int, TcpTransportParams& params) {
    params.liveness = SocketLiveness{7, 3, 4, 9000};
  }));
  int checked = 0;
  const testing::ObservedLiveness want{1, 7, 3, 4, 9000};
  EXPECT_EQ(testing::liveness_mismatches(before, want, &checked), "") << "expected " << want.text();
  // Each pair holds sockets_per_peer connections, seen from both ends in this process.
  const int sockets_per_peer = TcpTransportParams().sockets_per_peer;
  EXPECT_EQ(checked, size * (size - 1) * sockets_per_peer);
}

TEST(TcpKeepalive, WithoutAConfiguredUserTimeoutNoConnectionCarriesOne) {
  const std::vector<int> before = testing::connected_tcp_sockets();
  Cluster cluster;
  ASSERT_OK(make_cluster(2, &cluster, [](int, TcpTransportParams& params) {
    params.liveness = SocketLiveness{7, 3, 4, 0, 20000};
  }));
  int checked = 0;
  const testing::ObservedLiveness want{1, 7, 3, 4, 0};
  EXPECT_EQ(testing::liveness_mismatches(before, want, &checked), "") << "expected " << want.text();
  EXPECT_EQ(checked, 2 * TcpTransportParams().sockets_per_peer);
}

TEST(TcpKeepalive, TheSettingsFillTheParametersAndABadOneIsAnError) {
  {
    testing::ScopedEnv idle("COLLX_TCP_KEEPALIVE_IDLE_S", "6");
    testing::ScopedEnv user("COLLX_TCP_USER_TIMEOUT_MS", "12000");
    testing::ScopedEnv unacked("COLLX_TCP_UNACKED_TIMEOUT_MS", "7000");
    TcpTransportParams params;
    ASSERT_OK(load_tcp_settings(&params));
    EXPECT_EQ(params.liveness.keepalive_idle_s, 6);
    EXPECT_EQ(params.liveness.user_timeout_ms, 12000);
    EXPECT_EQ(params.liveness.unacked_timeout_ms, 7000);
  }
  testing::ScopedEnv count("COLLX_TCP_KEEPALIVE_COUNT", "many");
  TcpTransportParams params;
  Status st = load_tcp_settings(&params);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("COLLX_TCP_KEEPALIVE_COUNT"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tcp_test
}  // namespace collx
