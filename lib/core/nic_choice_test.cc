// The rank's network interface: nearest among the reachable ones, never an unreachable one.
#include "lib/core/nic_choice.h"

#include <gtest/gtest.h>

#include "lib/topo/topo_load.h"

namespace collx {
namespace {

#if defined(COLLX_HAVE_HWLOC)
topo::Topology two_sockets() {
  topo::Topology t;
  Status st = topo::load_xml(std::string(COLLX_SOURCE_DIR) + "/lib/topo/testdata/two_sockets_gpus_nics.xml", &t);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

TEST(NicChoice, EachRankGetsTheReachableNicNearestItsNumaNode) {
  const topo::Topology t = two_sockets();
  // 4 local ranks on NUMA nodes 0..3; ib0 sits in package 0, ib1 on NUMA node 3.
  EXPECT_EQ(nearest_reachable_nic(t, {"ib0", "ib1"}, 0, 4), "ib0");
  EXPECT_EQ(nearest_reachable_nic(t, {"ib0", "ib1"}, 3, 4), "ib1");
}

TEST(NicChoice, UnreachableNicsAreNeverChosenEvenWhenNearer) {
  const topo::Topology t = two_sockets();
  EXPECT_EQ(nearest_reachable_nic(t, {"ib1"}, 0, 4), "ib1");  // ib0 is nearer but not reachable
  EXPECT_EQ(nearest_reachable_nic(t, {"eth2"}, 3, 4), "eth2");
  EXPECT_EQ(nearest_reachable_nic(t, {}, 0, 4), "");
  EXPECT_EQ(nearest_reachable_nic(t, {"wlan9"}, 0, 4), "");
}
#endif

TEST(NicChoice, TheLoopbackSubnetHoldsLoopbackAndBadAddressesHoldNothing) {
  const std::vector<std::string> lo = interfaces_on_subnet_of("127.0.0.1");
  ASSERT_FALSE(lo.empty());
  EXPECT_EQ(lo[0], "lo");
  EXPECT_TRUE(interfaces_on_subnet_of("not an address").empty());
  EXPECT_TRUE(interfaces_on_subnet_of("192.0.2.77").empty());  // TEST-NET-1: not ours
}

}  // namespace
}  // namespace collx
