// The transport table as lib/core uses it (factory.h): the order of the rows decides which
// transport a communicator gets, and the TCP row turns the core's placement into an
// interface choice without the core seeing TCP's parameters.
#include "transports/factory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "collx/collx.h"
#include "tests/support/board_bootstrap.h"

namespace collx {
namespace transport {
namespace {

const TransportFactory* row_of(uint32_t kind) {
  size_t count = 0;
  const TransportFactory* rows = transport_factories(&count);
  for (size_t i = 0; i < count; ++i) {
    if (rows[i].kind == kind) return &rows[i];
  }
  return nullptr;
}

TEST(TransportFactory, SharedMemoryComesFirstAndOnlyInsideOneHostThenTcpThenUcx) {
  size_t count = 0;
  const TransportFactory* rows = transport_factories(&count);
  ASSERT_EQ(count, 3u);
  EXPECT_EQ(rows[0].kind, static_cast<uint32_t>(COLLX_TRANSPORT_SHM));
  EXPECT_TRUE(rows[0].single_host_only);
  EXPECT_EQ(rows[1].kind, static_cast<uint32_t>(COLLX_TRANSPORT_TCP));
  EXPECT_FALSE(rows[1].single_host_only);
  EXPECT_TRUE(rows[1].built());  // TCP is never optional
  EXPECT_EQ(rows[2].kind, static_cast<uint32_t>(COLLX_TRANSPORT_UCX));
  EXPECT_STREQ(rows[2].name, "ucx");
}

TEST(TransportFactory, TcpAcrossHostsWithoutAStoreAddressNamesTheSettingToSet) {
  if (std::getenv("COLLX_SOCKET_IFNAME")) GTEST_SKIP() << "COLLX_SOCKET_IFNAME is set here";
  TransportSetup setup;
  setup.size = 2;
  setup.comm_name = "world";
  setup.single_host = false;  // and no route_to_host
  std::unique_ptr<Transport> t;
  const Status st = row_of(COLLX_TRANSPORT_TCP)->create(setup, &t);
  EXPECT_EQ(st.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(st.message().find("'world'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("COLLX_SOCKET_IFNAME"), std::string::npos) << st.message();
  EXPECT_EQ(t, nullptr);
}

TEST(TransportFactory, TcpAcrossHostsAsksTheCoreToPickAnInterfaceForTheRoutesAddress) {
  if (std::getenv("COLLX_SOCKET_IFNAME")) GTEST_SKIP() << "COLLX_SOCKET_IFNAME is set here";
  auto board = std::make_shared<testing::Board>(1);
  testing::BoardBootstrap bootstrap(board, 0);
  TransportSetup setup;
  setup.bootstrap = &bootstrap;
  setup.deadline = Deadline::after_ms(30000);
  setup.single_host = false;
  setup.route_to_host = "127.0.0.1";
  std::string asked_for = "(not asked)";
  setup.pick_interface = [&](const std::string& route_ip) {
    asked_for = route_ip;
    return std::string();  // keep the route's interface
  };
  std::unique_ptr<Transport> t;
  const Status st = row_of(COLLX_TRANSPORT_TCP)->create(setup, &t);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(asked_for, "127.0.0.1");
  EXPECT_STREQ(t->name(), "tcp");
  t->close(Deadline::after_ms(2000));
}

}  // namespace
}  // namespace transport
}  // namespace collx
