// The cost model's hierarchical all-reduce candidate (cost_model_hierarchy.cc).
#include <gtest/gtest.h>

#include <algorithm>

#include "lib/core/cost_model.h"

namespace collx {
namespace {

bool offers(const CostModel& model, collx_coll_t coll) {
  const auto c = model.candidates_here(coll);
  return std::find(c.begin(), c.end(), COLLX_ALGO_HIERARCHICAL) != c.end();
}

CostModel tcp_over_hosts(int hosts, int per_host, bool uniform) {
  CostModel model("tcp", default_link_cost("tcp"));
  HostLayout layout;
  layout.hosts = hosts;
  layout.max_per_host = per_host;
  layout.uniform = uniform;
  layout.intra_transport = "shm";
  layout.intra = default_link_cost("shm");
  model.set_hosts(layout);
  return model;
}

TEST(CostModelHierarchy, OfferedOnlyForAllReduceAcrossHostsWithASharedHost) {
  EXPECT_FALSE(offers(CostModel("shm", default_link_cost("shm")), COLLX_COLL_ALLREDUCE));  // one host
  EXPECT_FALSE(offers(tcp_over_hosts(4, 1, true), COLLX_COLL_ALLREDUCE));                  // one rank per host
  EXPECT_TRUE(offers(tcp_over_hosts(2, 2, true), COLLX_COLL_ALLREDUCE));
  EXPECT_TRUE(offers(tcp_over_hosts(2, 3, false), COLLX_COLL_ALLREDUCE));
  EXPECT_FALSE(offers(tcp_over_hosts(2, 2, true), COLLX_COLL_REDUCE_SCATTER));
  EXPECT_FALSE(offers(tcp_over_hosts(2, 2, true), COLLX_COLL_BROADCAST));
  // The static list (what a communicator without a host layout considers) never has it.
  const auto plain = CostModel::candidates(COLLX_COLL_ALLREDUCE);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), COLLX_ALGO_HIERARCHICAL), plain.end());
}

TEST(CostModelHierarchy, EqualHostsAddReduceScatterAcrossAndAllGather) {
  const CostModel model = tcp_over_hosts(2, 2, true);
  const uint64_t n = 64 << 20, chunk = 512 << 10;
  const CostModel shm("shm", default_link_cost("shm"));
  const CostModel tcp("tcp", default_link_cost("tcp"));
  double across = 1e300;
  for (collx_algorithm_t a : CostModel::candidates(COLLX_COLL_ALLREDUCE)) {
    across = std::min(across, tcp.predict(COLLX_COLL_ALLREDUCE, a, n / 2, 2, chunk).micros);
  }
  const double expected = shm.predict(COLLX_COLL_REDUCE_SCATTER, COLLX_ALGO_RING, n, 2, chunk).micros + across +
                          shm.predict(COLLX_COLL_ALLGATHER, COLLX_ALGO_RING, n, 2, chunk).micros;
  EXPECT_DOUBLE_EQ(model.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_HIERARCHICAL, n, 4, chunk).micros, expected);
  // Large vectors: shared memory inside hosts and half the bytes across them beat a TCP ring.
  EXPECT_EQ(model.best(COLLX_COLL_ALLREDUCE, n, 4, chunk), COLLX_ALGO_HIERARCHICAL);
}

TEST(CostModelHierarchy, UnequalHostsGoThroughLeaders) {
  const CostModel model = tcp_over_hosts(2, 3, false);
  const uint64_t n = 1 << 20, chunk = 512 << 10;
  const CostModel shm("shm", default_link_cost("shm"));
  const CostModel tcp("tcp", default_link_cost("tcp"));
  double across = 1e300;
  for (collx_algorithm_t a : CostModel::candidates(COLLX_COLL_ALLREDUCE)) {
    across = std::min(across, tcp.predict(COLLX_COLL_ALLREDUCE, a, n, 2, chunk).micros);
  }
  const double expected = shm.predict(COLLX_COLL_REDUCE, COLLX_ALGO_BINOMIAL, n, 3, chunk).micros + across +
                          shm.predict(COLLX_COLL_BROADCAST, COLLX_ALGO_BINOMIAL, n, 3, chunk).micros;
  EXPECT_DOUBLE_EQ(model.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_HIERARCHICAL, n, 4, chunk).micros, expected);
}

TEST(CostModelHierarchy, ForcedWithoutHostsIsTheRing) {
  const CostModel model("shm", default_link_cost("shm"));
  EXPECT_DOUBLE_EQ(model.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_HIERARCHICAL, 1 << 20, 4, 512 << 10).micros,
                   model.predict(COLLX_COLL_ALLREDUCE, COLLX_ALGO_RING, 1 << 20, 4, 512 << 10).micros);
}

}  // namespace
}  // namespace collx
