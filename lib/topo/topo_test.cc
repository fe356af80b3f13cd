// Topology loading and the decisions taken from it, on hwloc synthetic topologies and on
// testdata/two_sockets_gpus_nics.xml: 2 packages x 2 NUMA nodes x 2 cores x 2 PUs; GPU
// cuda0 on NUMA 0, InfiniBand ib0 (200 Gb/s) on NUMA 1, Ethernet eth2 (100 Gb/s) on
// NUMA 2, GPU cuda1 and InfiniBand ib1 (200 Gb/s) on NUMA 3.
#include <gtest/gtest.h>

#include "lib/topo/topo_decide.h"
#include "lib/topo/topo_load.h"
#include "lib/topo/topo_render.h"

namespace collx {
namespace topo {
namespace {

const std::string kXml = std::string(COLLX_SOURCE_DIR) + "/lib/topo/testdata/two_sockets_gpus_nics.xml";

#ifndef COLLX_HAVE_HWLOC
TEST(Topology, UnsupportedWithoutHwloc) {
  Topology t;
  Status s = load_synthetic("pack:2 core:2 pu:1", &t);
  EXPECT_EQ(s.code(), COLLX_ERR_UNSUPPORTED);
  EXPECT_NE(s.message().find("built without hwloc"), std::string::npos) << s.message();
}
#else

Topology load(const std::string& what, bool xml) {
  Topology t;
  Status s = xml ? load_xml(what, &t) : load_synthetic(what, &t);
  EXPECT_TRUE(s.ok()) << s.message();
  return t;
}

int nic_named(const Topology& t, const std::string& name) {
  for (size_t i = 0; i < t.nics.size(); ++i) {
    if (t.nics[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

TEST(Topology, SyntheticCounts) {
  Topology t = load("pack:2 numa:2 core:4 pu:2", false);
  EXPECT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.numa_nodes.size(), 4u);
  EXPECT_EQ(t.cores.size(), 16u);
  EXPECT_EQ(t.pus.size(), 32u);
  EXPECT_EQ(t.numa_nodes[3].package, 1);
  EXPECT_EQ(cpu_list(t.numa_nodes[1].pus), "8-15");
  EXPECT_EQ(t.pus[9].numa, 1);
  EXPECT_EQ(t.pus[9].core, 4);
  EXPECT_TRUE(t.pci.empty());
}

TEST(Topology, BadInputsAreInvalidArgs) {
  Topology t;
  EXPECT_EQ(load_synthetic("pack:two", &t).code(), COLLX_ERR_INVALID_ARG);
  Status s = load_xml("/no/such/file.xml", &t);
  EXPECT_EQ(s.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(s.message().find("/no/such/file.xml"), std::string::npos) << s.message();
  EXPECT_EQ(load_xml("<topology>broken", &t).code(), COLLX_ERR_INVALID_ARG);
}

TEST(Topology, XmlDevicesAndLocality) {
  Topology t = load(kXml, true);
  ASSERT_EQ(t.numa_nodes.size(), 4u);
  EXPECT_EQ(t.hostname, "testbox");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].name, "cuda0");
  EXPECT_EQ(t.gpus[0].model, "Test GPU A");
  EXPECT_EQ(t.gpu_numa(0), 0);
  EXPECT_EQ(t.gpu_numa(1), 3);
  ASSERT_EQ(t.nics.size(), 3u);
  const int ib0 = nic_named(t, "ib0"), eth2 = nic_named(t, "eth2"), ib1 = nic_named(t, "ib1");
  ASSERT_GE(ib0, 0);
  ASSERT_GE(eth2, 0);
  ASSERT_GE(ib1, 0);
  EXPECT_EQ(t.nics[ib0].fabric, "mlx5_0");
  EXPECT_EQ(t.nics[ib0].speed_mbps, 200000);
  EXPECT_EQ(t.nic_numa(ib0), 1);
  EXPECT_EQ(t.nic_numa(eth2), 2);
  EXPECT_EQ(t.nic_numa(ib1), 3);
  EXPECT_EQ(nearest_numa_of_pci(t, "0000:ca:00.0"), 3);
  EXPECT_EQ(nearest_numa_of_pci(t, "17:00.0"), 0);
  EXPECT_EQ(nearest_numa_of_pci(t, "0000:ff:00.0"), -1);
  EXPECT_EQ(cpu_list(t.pci[t.gpus[1].pci].pus), "12-15");
}

TEST(Topology, NicNearestTheRank) {
  Topology t = load(kXml, true);
  const int ib0 = nic_named(t, "ib0"), eth2 = nic_named(t, "eth2"), ib1 = nic_named(t, "ib1");
  // By GPU: cuda1 shares NUMA 3 with ib1; cuda0's NUMA 0 has no NIC, its package has ib0.
  EXPECT_EQ(nic_for_rank(t, 0, 2, 1), ib1);
  EXPECT_EQ(nic_for_rank(t, 0, 2, 0), ib0);
  // By local rank (4 ranks -> NUMA 0..3): the same node beats a faster one in the package.
  EXPECT_EQ(nic_for_rank(t, 0, 4, -1), ib0);
  EXPECT_EQ(nic_for_rank(t, 1, 4, -1), ib0);
  EXPECT_EQ(nic_for_rank(t, 2, 4, -1), eth2);
  EXPECT_EQ(nic_for_rank(t, 3, 4, -1), ib1);
  Status s;
  EXPECT_EQ(nic_for_rank(t, 4, 4, -1, &s), -1);
  EXPECT_EQ(s.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(nic_for_rank(t, 0, 4, 2, &s), -1);
  EXPECT_NE(s.message().find("GPU 2 does not exist"), std::string::npos) << s.message();
  // No NIC at all.
  EXPECT_EQ(nic_for_rank(load("pack:1 core:2 pu:1", false), 0, 1, -1), -1);
}

TEST(Topology, EqualNicsAreSharedOutByLocalRank) {
  Topology t = load(kXml, true);
  for (Nic& n : t.nics) n.pci = -1;  // no locality: all equally far, ib0 and ib1 fastest
  const int a = nic_for_rank(t, 0, 4, -1), b = nic_for_rank(t, 1, 4, -1);
  EXPECT_NE(a, b);
  EXPECT_EQ(t.nics[a].speed_mbps, 200000);
  EXPECT_EQ(t.nics[b].speed_mbps, 200000);
}

TEST(Topology, BindCpus) {
  Topology t = load(kXml, true);
  std::vector<int> pus;
  ASSERT_TRUE(bind_cpus(t, BindMode::kNone, 0, 4, -1, &pus).ok());
  EXPECT_TRUE(pus.empty());
  ASSERT_TRUE(bind_cpus(t, BindMode::kNuma, 1, 4, -1, &pus).ok());
  EXPECT_EQ(cpu_list(pus), "4-7");
  ASSERT_TRUE(bind_cpus(t, BindMode::kNuma, 5, 8, -1, &pus).ok());  // 2 ranks per node
  EXPECT_EQ(cpu_list(pus), "8-11");
  ASSERT_TRUE(bind_cpus(t, BindMode::kNuma, 0, 2, 1, &pus).ok());   // follows its GPU
  EXPECT_EQ(cpu_list(pus), "12-15");
  ASSERT_TRUE(bind_cpus(t, BindMode::kCore, 3, 8, -1, &pus).ok());
  EXPECT_EQ(cpu_list(pus), "6-7");
  ASSERT_TRUE(bind_cpus(t, BindMode::kCore, 1, 2, -1, &pus).ok());  // blocks: second half
  EXPECT_EQ(cpu_list(pus), "8-9");
  ASSERT_TRUE(bind_cpus(t, BindMode::kCore, 15, 16, -1, &pus).ok());  // oversubscribed: shared
  EXPECT_EQ(cpu_list(pus), "14-15");
  EXPECT_EQ(bind_cpus(t, BindMode::kCore, -1, 4, -1, &pus).code(), COLLX_ERR_INVALID_ARG);
}

TEST(Topology, BindModeParsing) {
  BindMode m = BindMode::kCore;
  ASSERT_TRUE(parse_bind_mode("", &m).ok());
  EXPECT_EQ(m, BindMode::kNone);
  ASSERT_TRUE(parse_bind_mode("NUMA", &m).ok());
  EXPECT_EQ(m, BindMode::kNuma);
  ASSERT_TRUE(parse_bind_mode("core", &m).ok());
  EXPECT_EQ(m, BindMode::kCore);
  Status s = parse_bind_mode("socket", &m);
  EXPECT_EQ(s.code(), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(s.message().find("COLLX_BIND='socket'"), std::string::npos) << s.message();
}

TEST(Topology, RingOrderGroupsHosts) {
  EXPECT_EQ(ring_order_by_host({"a", "b", "a", "b"}), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(ring_order_by_host({"b", "a", "c", "a", "b"}), (std::vector<int>{0, 4, 1, 3, 2}));
  EXPECT_EQ(ring_order_by_host({"x", "x", "x"}), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ring_order_by_host({}).empty());
}

TEST(Topology, RenderingsNameEverything) {
  Topology t = load(kXml, true);
  const std::string text = to_text(t);
  EXPECT_NE(text.find("NUMA node 3 (os 3): 64.0 GiB, PUs 12-15"), std::string::npos) << text;
  EXPECT_NE(text.find("ib1 / mlx5_1: 200 Gb/s, PCI 0000:cb:00.0, NUMA 3"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu 0: cuda0 Test GPU A, PCI 0000:17:00.0, NUMA 0"), std::string::npos) << text;
  const std::string json = to_json(t);
  EXPECT_NE(json.find("\"name\": \"eth2\", \"fabric\": \"\", \"speed_mbps\": 100000, \"pci\": \"0000:98:00.0\", "
                      "\"numa\": 2"), std::string::npos) << json;
  const std::string dot = to_dot(t);
  EXPECT_NE(dot.find("numa3 -- gpu1"), std::string::npos) << dot;
  EXPECT_NE(dot.find("numa1 -- nic0"), std::string::npos) << dot;
}

TEST(Topology, ThisMachineLoads) {
  Topology t;
  Status s = load_this_machine(&t);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_GE(t.pus.size(), 1u);
  EXPECT_GE(t.numa_nodes.size(), 1u);
  EXPECT_FALSE(t.hostname.empty());
}
#endif

}  // namespace
}  // namespace topo
}  // namespace collx
