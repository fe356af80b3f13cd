#include "transports/tcp/socket_util.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

namespace collx {
namespace tcp {
namespace {

TEST(SocketUtil, ParseAddress) {
  SocketAddress a;
  ASSERT_TRUE(parse_address("10.0.0.7:41234", &a).ok());
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 41234);
  EXPECT_EQ(a.to_string(), "10.0.0.7:41234");
  EXPECT_FALSE(a.is_loopback());

  ASSERT_TRUE(parse_address("[::1]:80", &a).ok());
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.to_string(), "[::1]:80");
  EXPECT_TRUE(a.is_loopback());

  ASSERT_TRUE(parse_address("127.0.0.5:0", &a).ok());
  EXPECT_TRUE(a.is_loopback());

  for (const char* bad : {"", "10.0.0.7", "10.0.0.7:", "10.0.0.7:99999", "10.0.0.7:12a", "host:80", "::1:80",
                          "[::1]80", "[::1", "1.2.3.4:5:6"}) {
    EXPECT_FALSE(parse_address(bad, &a).ok()) << bad;
  }
}

TEST(SocketUtil, InterfaceSpec) {
  InterfaceSpec spec = parse_interface_spec("eth,ib");
  EXPECT_FALSE(spec.exclude);
  EXPECT_FALSE(spec.exact);
  EXPECT_TRUE(interface_matches(spec, "eth0"));
  EXPECT_TRUE(interface_matches(spec, "ib1"));
  EXPECT_FALSE(interface_matches(spec, "docker0"));

  spec = parse_interface_spec("^docker,lo");
  EXPECT_TRUE(spec.exclude);
  EXPECT_TRUE(interface_matches(spec, "eth0"));
  EXPECT_FALSE(interface_matches(spec, "docker0"));
  EXPECT_FALSE(interface_matches(spec, "lo"));

  spec = parse_interface_spec("=eth0");
  EXPECT_TRUE(spec.exact);
  EXPECT_TRUE(interface_matches(spec, "eth0"));
  EXPECT_FALSE(interface_matches(spec, "eth01"));

  spec = parse_interface_spec("^=eth0");
  EXPECT_TRUE(spec.exclude && spec.exact);
  EXPECT_FALSE(interface_matches(spec, "eth0"));
  EXPECT_TRUE(interface_matches(spec, "eth01"));
}

LocalInterface make_interface(const char* name, const char* address, bool loopback) {
  LocalInterface i;
  i.name = name;
  EXPECT_TRUE(parse_address(address, &i.address).ok());
  i.loopback = loopback;
  return i;
}

TEST(SocketUtil, ChooseInterface) {
  std::vector<LocalInterface> interfaces = {
      make_interface("lo", "127.0.0.1:0", true),
      make_interface("docker0", "172.17.0.1:0", false),
      make_interface("eth0", "[2001:db8::5]:0", false),
      make_interface("eth0", "10.1.2.3:0", false),
  };
  LocalInterface chosen;
  ASSERT_TRUE(choose_interface(interfaces, "eth", &chosen).ok());
  EXPECT_EQ(chosen.address.ip(), "10.1.2.3");  // IPv4 preferred
  ASSERT_TRUE(choose_interface(interfaces, "^eth", &chosen).ok());
  EXPECT_EQ(chosen.name, "docker0");  // exclusion lists skip loopback
  ASSERT_TRUE(choose_interface(interfaces, "^docker,eth", &chosen).ok());
  EXPECT_EQ(chosen.name, "lo");  // ... unless nothing else is left
  ASSERT_TRUE(choose_interface(interfaces, "=lo", &chosen).ok());
  EXPECT_EQ(chosen.name, "lo");
  Status status = choose_interface(interfaces, "ib", &chosen);
  EXPECT_EQ(status.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(status.message().find("eth0 (10.1.2.3)"), std::string::npos) << status.message();
}

TEST(SocketUtil, ChooseLocalAddress) {
  SocketAddress a;
  std::string why;
  ASSERT_TRUE(choose_local_address("", "", &a, &why).ok());
  EXPECT_EQ(a.ip(), "127.0.0.1");
  ASSERT_TRUE(choose_local_address("", "localhost:29500", &a, &why).ok());
  EXPECT_EQ(a.ip(), "127.0.0.1");
  ASSERT_TRUE(choose_local_address("", "127.0.0.1", &a, &why).ok());
  EXPECT_EQ(a.ip(), "127.0.0.1");
  ASSERT_TRUE(choose_local_address("=lo", "", &a, &why).ok()) << why;
  EXPECT_TRUE(a.is_loopback());
  EXPECT_FALSE(choose_local_address("no_such_interface_x", "", &a, &why).ok());
  EXPECT_FALSE(choose_local_address("", "no-such-host.invalid", &a, &why).ok());
}

TEST(SocketUtil, ListenAndConnect) {
  SocketAddress local;
  ASSERT_TRUE(parse_address("127.0.0.1:0", &local).ok());
  UniqueFd listener;
  SocketAddress bound;
  ASSERT_TRUE(listen_on(local, 16, &listener, &bound).ok());
  EXPECT_NE(bound.port(), 0);
  UniqueFd client;
  int rc = start_connect(bound, &client);
  ASSERT_TRUE(rc == 0 || rc == EINPROGRESS) << rc;
  pollfd pfd{client.get(), POLLOUT, 0};
  ASSERT_EQ(::poll(&pfd, 1, 2000), 1);
  EXPECT_EQ(socket_error(client.get()), 0);

  // Nothing listens on the port once the listener is gone: refused.
  uint16_t port = bound.port();
  listener.reset();
  SocketAddress gone = bound;
  gone.set_port(port);
  UniqueFd refused;
  rc = start_connect(gone, &refused);
  if (rc == EINPROGRESS) {
    pollfd p2{refused.get(), POLLOUT, 0};
    ASSERT_EQ(::poll(&p2, 1, 2000), 1);
    rc = socket_error(refused.get());
  }
  EXPECT_EQ(rc, ECONNREFUSED);
}

}  // namespace
}  // namespace tcp
}  // namespace collx
