// Keepalive, the unacknowledged-data window and the user timeout: the defaults report a silent
// peer within 30 s without the user timeout on transport sockets, bad settings are
// errors naming the variable, and the options reach the socket and the sockets accepted
// from a listener that has them.
#include "lib/common/socket_liveness.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/common/settings.h"
#include "tests/support/scoped_env.h"
#include "tests/support/socket_options.h"

namespace collx {
namespace {

using testing::ObservedLiveness;
using testing::ScopedEnv;

void clear_liveness_settings() {
  for (SettingId id : {SettingId::TCP_KEEPALIVE_IDLE_S, SettingId::TCP_KEEPALIVE_INTERVAL_S,
                       SettingId::TCP_KEEPALIVE_COUNT, SettingId::TCP_USER_TIMEOUT_MS,
                       SettingId::TCP_UNACKED_TIMEOUT_MS}) {
    unsetenv(setting_info(id).name);
  }
}

TEST(SocketLiveness, TheDefaultsReportASilentPeerWithin30Seconds) {
  clear_liveness_settings();
  SocketLiveness liveness;
  ASSERT_TRUE(socket_liveness_from_settings(&liveness).ok());
  EXPECT_GT(liveness.keepalive_idle_s, 0) << "keepalive is on by default";
  EXPECT_EQ(liveness.user_timeout_ms, 0) << "no TCP_USER_TIMEOUT by default: it drops live peers that stop reading";
  EXPECT_GT(liveness.unacked_timeout_ms, 0) << "the transport watches unacknowledged data by default";
  // An idle connection: keepalive's idle time plus its count of unanswered probes. Data in
  // flight: the unacknowledged-data window plus one check period. The worse of the two.
  const int64_t bound = liveness.silent_peer_report_ms();
  EXPECT_GT(bound, 0);
  EXPECT_LE(bound, 30000) << "idle " << liveness.keepalive_idle_s << " s, interval " << liveness.keepalive_interval_s
                          << " s, count " << liveness.keepalive_count << ", unacked window "
                          << liveness.unacked_timeout_ms << " ms";
  // Store sockets get the window as their user timeout (they cannot run into a zero window).
  EXPECT_EQ(liveness.for_store().user_timeout_ms, liveness.unacked_timeout_ms);
  EXPECT_EQ(liveness.for_store().unacked_timeout_ms, 0);
}

TEST(SocketLiveness, TheBoundFollowsTheKernelsRule) {
  // Without a user timeout the probe count decides; with one, the first probe after it does.
  SocketLiveness counted{10, 5, 3, 0};
  EXPECT_EQ(counted.silent_peer_report_ms(), -1) << "data in flight is not bounded without a window";
  SocketLiveness test_values{1, 1, 2, 3000};
  EXPECT_EQ(test_values.silent_peer_report_ms(), 3000);
  SocketLiveness short_user_timeout{10, 5, 3, 2000};
  EXPECT_EQ(short_user_timeout.silent_peer_report_ms(), 15000) << "an idle connection waits for one probe";
  SocketLiveness unacked_window{10, 5, 3, 0, 20000};
  EXPECT_EQ(unacked_window.silent_peer_report_ms(), 25000) << "keepalive: 10 s + 3 x 5 s";
  SocketLiveness long_window{1, 1, 2, 0, 5000};
  EXPECT_EQ(long_window.silent_peer_report_ms(), 5000 + kUnackedCheckPeriodMs) << "the window and one check period";
  SocketLiveness both{1, 1, 2, 3000, 5000};
  EXPECT_EQ(both.silent_peer_report_ms(), 3000) << "the shorter of the user timeout and the window";
  SocketLiveness off;
  EXPECT_EQ(off.silent_peer_report_ms(), -1);
}

TEST(SocketLiveness, MalformedOrOutOfRangeSettingsAreErrorsNamingTheVariable) {
  clear_liveness_settings();
  struct Case {
    const char* name;
    const char* value;
  } cases[] = {{"COLLX_TCP_KEEPALIVE_IDLE_S", "ten"},   {"COLLX_TCP_KEEPALIVE_IDLE_S", "-1"},
               {"COLLX_TCP_KEEPALIVE_INTERVAL_S", "0"}, {"COLLX_TCP_KEEPALIVE_COUNT", "1000"},
               {"COLLX_TCP_USER_TIMEOUT_MS", "-5"},     {"COLLX_TCP_USER_TIMEOUT_MS", "9999999999"},
               {"COLLX_TCP_UNACKED_TIMEOUT_MS", "-1"},  {"COLLX_TCP_UNACKED_TIMEOUT_MS", "soon"}};
  for (const Case& c : cases) {
    ScopedEnv env(c.name, c.value);
    SocketLiveness liveness;
    Status st = socket_liveness_from_settings(&liveness);
    EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG) << c.name << "=" << c.value;
    EXPECT_NE(st.message().find(c.name), std::string::npos) << st.message();
  }
}

TEST(SocketLiveness, AcceptedSocketsInheritTheListenersOptions) {
  const SocketLiveness liveness{7, 3, 4, 9000};
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  ASSERT_TRUE(apply_socket_liveness(listener, liveness).ok());
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);

  int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(client, 0);
  ASSERT_TRUE(apply_socket_liveness(client, liveness).ok());
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(accepted, 0);
  for (int fd : {client, accepted}) {
    const ObservedLiveness seen = testing::observe_liveness(fd);
    EXPECT_EQ(seen.keepalive, 1) << seen.text();
    EXPECT_EQ(seen.idle_s, 7) << seen.text();
    EXPECT_EQ(seen.interval_s, 3) << seen.text();
    EXPECT_EQ(seen.count, 4) << seen.text();
    EXPECT_EQ(seen.user_timeout_ms, 9000) << seen.text();
  }
  close(accepted);
  close(client);
  close(listener);
}

TEST(SocketLiveness, ADefaultConstructedValueLeavesTheKernelDefaults) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(apply_socket_liveness(fd, SocketLiveness()).ok());
  const ObservedLiveness seen = testing::observe_liveness(fd);
  EXPECT_EQ(seen.keepalive, 0) << seen.text();
  EXPECT_EQ(seen.user_timeout_ms, 0) << seen.text();
  close(fd);
}

TEST(SocketLiveness, AnOptionTheKernelRefusesIsAnErrorNamingIt) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);  // no TCP options on a Unix socket
  ASSERT_GE(fd, 0);
  Status st = apply_socket_liveness(fd, SocketLiveness{7, 3, 4, 9000});
  close(fd);
  EXPECT_EQ(st.code(), COLLX_ERR_SYSTEM);
  EXPECT_NE(st.message().find("TCP_KEEP"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace collx
