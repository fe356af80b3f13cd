// The grid's expert layout: membership of the EP, TP|EP and EDP communicators and the
// expert coordinates for several shapes and orders, against a brute-force Megatron-Core
// RankGenerator (dense: cp, dp; expert: cp = 1, ep, dp = edp), and the size rules.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::ThreadRanks;
using Coords = std::array<int32_t, COLLX_GRID_NUM_DIMS>;

struct Shape {
  int32_t tp, cp, dp, pp, ep;
  const char* order;  // NULL = default
};

// Megatron's RankGenerator: every rank's coordinates for token sizes `size` (indexed by
// COLLX_DIM_*), the order's first token fastest, by enumerating every coordinate tuple.
std::vector<Coords> generator(const char* order_c, const Coords& size) {
  const std::string order = order_c ? order_c : COLLX_GRID_DEFAULT_ORDER;
  const char* names[COLLX_GRID_NUM_DIMS] = {"tp", "cp", "ep", "dp", "pp"};
  std::vector<int> perm;
  std::stringstream ss(order);
  std::string tok;
  while (std::getline(ss, tok, '-'))
    for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d)
      if (tok == names[d]) perm.push_back(d);
  int32_t world = 1;
  for (int32_t s : size) world *= s;
  std::vector<Coords> out(static_cast<size_t>(world));
  for (int32_t n = 0; n < world; ++n) {
    Coords c{};  // tokens left out of the order have size 1 (coordinate 0)
    int32_t rest = n, rank = 0, stride = 1;
    for (int d : perm) {
      c[d] = rest % size[d];
      rest /= size[d];
      rank += c[d] * stride;
      stride *= size[d];
    }
    out[static_cast<size_t>(rank)] = c;
  }
  return out;
}

// The ranks that agree with `rank` on every axis not in `varying`, in world-rank order.
std::vector<int32_t> group(const std::vector<Coords>& coords, int32_t rank, const std::vector<int>& varying) {
  std::vector<int32_t> g;
  for (size_t r = 0; r < coords.size(); ++r) {
    bool same = true;
    for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d) {
      bool v = false;
      for (int x : varying) v = v || x == d;
      if (!v && coords[r][d] != coords[static_cast<size_t>(rank)][d]) same = false;
    }
    if (same) g.push_back(static_cast<int32_t>(r));
  }
  return g;
}

collx_grid_config_t expert_config(int32_t tp, int32_t cp, int32_t dp, int32_t pp, int32_t ep, const char* order) {
  collx_grid_config_t cfg;
  collx_grid_config_init(&cfg, sizeof cfg);
  cfg.tp = tp;
  cfg.cp = cp;
  cfg.dp = dp;
  cfg.pp = pp;
  cfg.ep = ep;
  cfg.order = order;
  return cfg;
}

std::vector<int32_t> members(collx_comm_t sub, int32_t rank) {
  int32_t size = 0;
  collx_comm_size(sub, &size);
  std::vector<int32_t> got(static_cast<size_t>(size), -1);
  EXPECT_EQ(collx_allgather(&rank, got.data(), 1, COLLX_INT32, sub, nullptr), COLLX_OK);
  return got;
}

void check_shapes(int world_size, const std::vector<Shape>& shapes) {
  ThreadRanks world(world_size, 20000);
  ASSERT_TRUE(world.ok()) << world.error();
  for (const Shape& s : shapes) {
    SCOPED_TRACE("tp=" + std::to_string(s.tp) + " cp=" + std::to_string(s.cp) + " dp=" + std::to_string(s.dp) +
                 " pp=" + std::to_string(s.pp) + " ep=" + std::to_string(s.ep) + " order=" + (s.order ? s.order : "default"));
    const int32_t edp = s.cp * s.dp / s.ep;
    const std::vector<Coords> dense = generator(s.order, {s.tp, s.cp, 1, s.dp, s.pp});
    const std::vector<Coords> expert = generator(s.order, {s.tp, 1, s.ep, edp, s.pp});
    std::mutex mu;
    std::vector<std::string> failures;
    world.run([&](int rank, collx_comm_t comm) {
      auto fail = [&](const std::string& m) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back("rank " + std::to_string(rank) + ": " + m);
      };
      const collx_grid_config_t cfg = expert_config(s.tp, s.cp, s.dp, s.pp, s.ep, s.order);
      collx_grid_t grid = nullptr;
      if (collx_grid_create(comm, &cfg, &grid) != COLLX_OK)
        return fail(std::string("create: ") + collx_grid_last_error(nullptr));
      int32_t ed[COLLX_GRID_NUM_DIMS], dims[COLLX_GRID_NUM_DIMS];
      collx_grid_expert_dims(grid, ed);
      collx_grid_dims(grid, dims);
      if (ed[COLLX_DIM_TP] != s.tp || ed[COLLX_DIM_CP] != 1 || ed[COLLX_DIM_EP] != s.ep ||
          ed[COLLX_DIM_DP] != edp || ed[COLLX_DIM_PP] != s.pp || dims[COLLX_DIM_EP] != s.ep)
        fail("expert dims wrong");
      for (int32_t r = 0; r < world_size; ++r) {
        Coords c{}, e{};
        collx_grid_coords(grid, r, c.data());
        collx_grid_expert_coords(grid, r, e.data());
        const Coords& want_e = expert[static_cast<size_t>(r)];
        Coords want_c = dense[static_cast<size_t>(r)];
        want_c[COLLX_DIM_EP] = want_e[COLLX_DIM_EP];
        if (e != want_e) fail("expert coords of rank " + std::to_string(r));
        if (c != want_c) fail("coords of rank " + std::to_string(r));
        int32_t back = -1;
        if (collx_grid_rank_of(grid, c.data(), &back) != COLLX_OK || back != r) fail("rank_of of " + std::to_string(r));
      }
      struct Set {
        uint32_t axes;
        const std::vector<Coords>* layout;
        std::vector<int> varying;
      };
      const std::vector<Set> sets = {
          {COLLX_AXIS_EP, &expert, {COLLX_DIM_EP}},
          {COLLX_AXIS_TP | COLLX_AXIS_EP, &expert, {COLLX_DIM_TP, COLLX_DIM_EP}},
          {COLLX_AXIS_EDP, &expert, {COLLX_DIM_DP}},
          {COLLX_AXIS_DP | COLLX_AXIS_CP, &dense, {COLLX_DIM_DP, COLLX_DIM_CP}},
          {COLLX_AXIS_DP, &dense, {COLLX_DIM_DP}},
          {COLLX_AXIS_TP, &dense, {COLLX_DIM_TP}},
          {COLLX_AXIS_PP, &dense, {COLLX_DIM_PP}},
      };
      for (const Set& set : sets) {
        collx_comm_t sub = nullptr;
        if (collx_grid_comm(grid, set.axes, &sub) != COLLX_OK) {
          fail("no communicator for axes " + std::to_string(set.axes));
          continue;
        }
        if (members(sub, rank) != group(*set.layout, rank, set.varying))
          fail("wrong members for axes " + std::to_string(set.axes));
      }
      collx_grid_destroy(grid);
    });
    for (const auto& f : failures) ADD_FAILURE() << f;
  }
}

TEST(ParallelGridExpert, GroupsMatchMegatronOnEightRanks) {
  check_shapes(8, {
                      {1, 1, 8, 1, 2, nullptr},
                      {1, 1, 8, 1, 4, nullptr},
                      {1, 1, 8, 1, 8, nullptr},
                      {2, 1, 2, 2, 2, nullptr},
                      {1, 2, 2, 2, 2, nullptr},  // an EP group spans the cp ranks
                      {2, 2, 2, 1, 4, nullptr},
                      {1, 2, 4, 1, 2, "tp-ep-dp-cp-pp"},  // cp slower than dp in the dense layers
                      {1, 1, 8, 1, 2, "tp-dp-ep-pp"},     // strided EP groups
                      {2, 1, 4, 1, 1, nullptr},           // ep = 1: EP is the rank itself, EDP = DP|CP
                  });
}

TEST(ParallelGridExpert, GroupsMatchMegatronOnFourRanks) {
  check_shapes(4, {{1, 1, 4, 1, 2, nullptr}, {1, 2, 2, 1, 4, nullptr}, {1, 1, 2, 2, 2, nullptr}});
}

// Default order, hard-coded: dp = 4, ep = 2 gives EP groups {0,1},{2,3} and expert-dp
// groups {0,2},{1,3}.
TEST(ParallelGridExpert, DefaultOrderGroupsHardCoded) {
  ThreadRanks world(4, 20000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    const collx_grid_config_t cfg = expert_config(1, 1, 0, 1, 2, nullptr);
    collx_grid_t grid = nullptr;
    ASSERT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_OK) << collx_grid_last_error(nullptr);
    collx_comm_t ep = nullptr, edp = nullptr;
    ASSERT_EQ(collx_grid_comm(grid, COLLX_AXIS_EP, &ep), COLLX_OK);
    ASSERT_EQ(collx_grid_comm(grid, COLLX_AXIS_EDP, &edp), COLLX_OK);
    const int32_t base_ep = rank & ~1, base_edp = rank & 1;
    EXPECT_EQ(members(ep, rank), (std::vector<int32_t>{base_ep, base_ep + 1}));
    EXPECT_EQ(members(edp, rank), (std::vector<int32_t>{base_edp, base_edp + 2}));
    collx_grid_destroy(grid);
  });
}

TEST(ParallelGridExpert, BadExpertSizesGiveInvalidArgOnEveryRank) {
  ThreadRanks world(4, 5000);
  ASSERT_TRUE(world.ok()) << world.error();
  struct Case {
    int32_t tp, dp, ep;
    const char* order;
    const char* needle;
  };
  const Case cases[] = {
      {1, 4, 3, nullptr, "ep = 3 does not divide cp*dp = 4"},
      {2, 2, 4, nullptr, "multiple of tp*ep*pp = 8"},
      {1, 4, 0, nullptr, "ep is 0"},
      {1, 4, 2, "tp-dp-pp", "\"ep\" is missing"},
  };
  for (const Case& k : cases) {
    world.run([&](int, collx_comm_t comm) {
      const collx_grid_config_t cfg = expert_config(k.tp, 1, k.dp, 1, k.ep, k.order);
      collx_grid_t grid = nullptr;
      EXPECT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_ERR_INVALID_ARG) << k.needle;
      EXPECT_EQ(grid, nullptr);
      EXPECT_NE(std::string(collx_grid_last_error(nullptr)).find(k.needle), std::string::npos)
          << collx_grid_last_error(nullptr);
    });
  }
  // A set mixing the dense and expert layouts is not a group; it is named.
  world.run([&](int, collx_comm_t comm) {
    const collx_grid_config_t cfg = expert_config(1, 1, 0, 1, 2, nullptr);
    collx_grid_t grid = nullptr;
    ASSERT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_OK);
    collx_comm_t sub = nullptr;
    EXPECT_EQ(collx_grid_comm(grid, COLLX_AXIS_EP | COLLX_AXIS_DP, &sub), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_grid_last_error(grid)).find("EP|DP"), std::string::npos) << collx_grid_last_error(grid);
    int32_t c[COLLX_GRID_NUM_DIMS];
    EXPECT_EQ(collx_grid_expert_coords(grid, 4, c), COLLX_ERR_INVALID_ARG);
    collx_grid_destroy(grid);
  });
}

}  // namespace
