// The public topology C API (include/collx/topology.h): handles, queries, JSON, decisions
// and error messages, on lib/topo/testdata/two_sockets_gpus_nics.xml.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "collx/topology.h"

namespace {

const std::string kXml = std::string(COLLX_SOURCE_DIR) + "/lib/topo/testdata/two_sockets_gpus_nics.xml";

#ifndef COLLX_HAVE_HWLOC
TEST(TopologyCApi, UnsupportedWithoutHwloc) {
  collx_topo_t t = nullptr;
  EXPECT_EQ(collx_topo_load(&t), COLLX_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("built without hwloc"), std::string::npos);
  const char* hosts[] = {"a", "b", "a"};
  int order[3];
  ASSERT_EQ(collx_topo_ring_order(hosts, 3, order), COLLX_OK);
  EXPECT_EQ(order[1], 2);
}
#else

struct Topo {
  collx_topo_t t = nullptr;
  Topo() { EXPECT_EQ(collx_topo_load_xml(kXml.c_str(), &t), COLLX_OK) << collx_last_error(nullptr); }
  ~Topo() { collx_topo_destroy(t); }
};

std::vector<int> cpus_of(collx_topo_t t, collx_topo_kind_t kind, int index) {
  int count = 0;
  EXPECT_EQ(collx_topo_cpus(t, kind, index, nullptr, 0, &count), COLLX_OK);
  std::vector<int> cpus(count);
  EXPECT_EQ(collx_topo_cpus(t, kind, index, cpus.data(), count, &count), COLLX_OK);
  return cpus;
}

TEST(TopologyCApi, CountsAndObjects) {
  Topo topo;
  int n = 0;
  ASSERT_EQ(collx_topo_count(topo.t, COLLX_TOPO_NUMA, &n), COLLX_OK);
  EXPECT_EQ(n, 4);
  ASSERT_EQ(collx_topo_count(topo.t, COLLX_TOPO_PU, &n), COLLX_OK);
  EXPECT_EQ(n, 16);
  ASSERT_EQ(collx_topo_count(topo.t, COLLX_TOPO_GPU, &n), COLLX_OK);
  EXPECT_EQ(n, 2);
  collx_topo_object_t o;
  ASSERT_EQ(collx_topo_object_init(&o, sizeof o), COLLX_OK);
  ASSERT_EQ(collx_topo_get(topo.t, COLLX_TOPO_GPU, 1, &o), COLLX_OK);
  EXPECT_STREQ(o.name, "cuda1");
  EXPECT_STREQ(o.pci_busid, "0000:ca:00.0");
  EXPECT_EQ(o.numa, 3);
  EXPECT_EQ(o.pci_vendor, 0x10deu);
  ASSERT_EQ(collx_topo_get(topo.t, COLLX_TOPO_NUMA, 2, &o), COLLX_OK);
  EXPECT_EQ(o.package, 1);
  EXPECT_EQ(o.bytes, 64ull << 30);
  EXPECT_EQ(cpus_of(topo.t, COLLX_TOPO_NUMA, 2), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(cpus_of(topo.t, COLLX_TOPO_PU, 5), (std::vector<int>{5}));
}

TEST(TopologyCApi, BadArgumentsNameWhatWasWrong) {
  Topo topo;
  collx_topo_object_t o;
  ASSERT_EQ(collx_topo_object_init(&o, sizeof o), COLLX_OK);
  EXPECT_EQ(collx_topo_get(topo.t, COLLX_TOPO_NIC, 3, &o), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("index 3 out of range"), std::string::npos);
  EXPECT_EQ(collx_topo_count(nullptr, COLLX_TOPO_PU, nullptr), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("topo is NULL"), std::string::npos);
  collx_topo_object_t raw{};
  EXPECT_EQ(collx_topo_get(topo.t, COLLX_TOPO_PU, 0, &raw), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("collx_topo_object_init"), std::string::npos);
  collx_topo_t none = nullptr;
  EXPECT_EQ(collx_topo_load_synthetic("nonsense:3", &none), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(collx_topo_destroy(nullptr), COLLX_OK);
}

TEST(TopologyCApi, JsonSizeQueryAndTooSmallBuffer) {
  Topo topo;
  size_t len = 0;
  ASSERT_EQ(collx_topo_to_json(topo.t, nullptr, &len), COLLX_OK);
  ASSERT_GT(len, 100u);
  std::vector<char> small(10);
  size_t cap = small.size();
  EXPECT_EQ(collx_topo_to_json(topo.t, small.data(), &cap), COLLX_ERR_INVALID_ARG);
  EXPECT_EQ(cap, len);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("too small"), std::string::npos);
  std::vector<char> buf(len);
  ASSERT_EQ(collx_topo_to_json(topo.t, buf.data(), &len), COLLX_OK);
  const std::string json(buf.data());
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"hostname\": \"testbox\""), std::string::npos);
}

TEST(TopologyCApi, Decisions) {
  Topo topo;
  int numa = -2, nic = -2;
  ASSERT_EQ(collx_topo_nearest_numa(topo.t, COLLX_TOPO_GPU, 0, &numa), COLLX_OK);
  EXPECT_EQ(numa, 0);
  EXPECT_EQ(collx_topo_nearest_numa(topo.t, COLLX_TOPO_CORE, 0, &numa), COLLX_ERR_INVALID_ARG);
  ASSERT_EQ(collx_topo_nic_for_rank(topo.t, 0, 2, 1, &nic), COLLX_OK);
  collx_topo_object_t o;
  collx_topo_object_init(&o, sizeof o);
  ASSERT_EQ(collx_topo_get(topo.t, COLLX_TOPO_NIC, nic, &o), COLLX_OK);
  EXPECT_STREQ(o.name, "ib1");
  EXPECT_EQ(o.speed_mbps, 200000);
  int cpus[16], count = 0;
  ASSERT_EQ(collx_topo_bind_cpus(topo.t, COLLX_BIND_CORE, 3, 8, -1, cpus, 16, &count), COLLX_OK);
  ASSERT_EQ(count, 2);
  EXPECT_EQ(cpus[0], 6);
  ::setenv("COLLX_BIND", "numa", 1);
  ASSERT_EQ(collx_topo_bind_cpus(topo.t, COLLX_BIND_FROM_ENV, 1, 4, -1, cpus, 16, &count), COLLX_OK);
  EXPECT_EQ(count, 4);
  EXPECT_EQ(cpus[0], 4);
  ::setenv("COLLX_BIND", "sockets", 1);
  EXPECT_EQ(collx_topo_bind_cpus(topo.t, COLLX_BIND_FROM_ENV, 1, 4, -1, cpus, 16, &count), COLLX_ERR_INVALID_ARG);
  EXPECT_NE(std::string(collx_last_error(nullptr)).find("COLLX_BIND='sockets'"), std::string::npos);
  ::unsetenv("COLLX_BIND");
  ASSERT_EQ(collx_topo_bind_cpus(topo.t, COLLX_BIND_FROM_ENV, 1, 4, -1, cpus, 16, &count), COLLX_OK);
  EXPECT_EQ(count, 0);  // default: none
  const char* hosts[] = {"n1", "n2", "n1", "n2"};
  int order[4];
  ASSERT_EQ(collx_topo_ring_order(hosts, 4, order), COLLX_OK);
  EXPECT_EQ(std::vector<int>(order, order + 4), (std::vector<int>{0, 2, 1, 3}));
}
#endif

}  // namespace
