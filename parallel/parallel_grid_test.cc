// Process grid: Megatron coordinates, sub-communicator membership, config mismatch and
// argument errors, on thread ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "collx/collx.h"
#include "collx/parallel.h"
#include "tests/support/thread_ranks.h"

namespace {

using collx::testing::ThreadRanks;
using Coords = std::array<int32_t, COLLX_GRID_NUM_DIMS>;

collx_grid_config_t make_config(int32_t tp, int32_t cp, int32_t dp, int32_t pp, const char* order = nullptr) {
  collx_grid_config_t c;
  EXPECT_EQ(collx_grid_config_init(&c, sizeof c), COLLX_OK);
  c.tp = tp;
  c.cp = cp;
  c.dp = dp;
  c.pp = pp;
  c.order = order;
  return c;
}

const uint32_t kSets[] = {
    COLLX_AXIS_TP, COLLX_AXIS_CP, COLLX_AXIS_DP, COLLX_AXIS_PP, COLLX_AXIS_DP | COLLX_AXIS_CP,
    COLLX_AXIS_TP | COLLX_AXIS_PP, COLLX_AXIS_TP | COLLX_AXIS_CP,
    COLLX_AXIS_TP | COLLX_AXIS_CP | COLLX_AXIS_DP,
    COLLX_AXIS_TP | COLLX_AXIS_CP | COLLX_AXIS_DP | COLLX_AXIS_PP};
const uint32_t kBit[COLLX_GRID_NUM_DIMS] = {COLLX_AXIS_TP, COLLX_AXIS_CP, COLLX_AXIS_EP, COLLX_AXIS_DP,
                                            COLLX_AXIS_PP};

// Megatron's default order: rank = tp + cp*TP + dp*TP*CP + pp*TP*CP*DP (ep = 1).
int32_t megatron_rank(const Coords& c, int32_t TP, int32_t CP, int32_t DP) {
  return c[COLLX_DIM_TP] + c[COLLX_DIM_CP] * TP + c[COLLX_DIM_DP] * TP * CP + c[COLLX_DIM_PP] * TP * CP * DP;
}

// Checks coordinates against Megatron's formula and every pre-created communicator's
// membership (allgather of world ranks inside it) against the coordinates.
void check_grid(int world_size, int32_t tp, int32_t cp, int32_t dp_arg, int32_t pp) {
  ThreadRanks world(world_size, 20000);
  ASSERT_TRUE(world.ok()) << world.error();
  const int32_t dp = dp_arg ? dp_arg : world_size / (tp * cp * pp);
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(m);
  };
  world.run([&](int rank, collx_comm_t comm) {
    collx_grid_config_t cfg = make_config(tp, cp, dp_arg, pp);
    collx_grid_t grid = nullptr;
    collx_status_t st = collx_grid_create(comm, &cfg, &grid);
    if (st != COLLX_OK) return fail("create: " + std::string(collx_grid_last_error(nullptr)));
    int32_t dims[COLLX_GRID_NUM_DIMS];
    collx_grid_dims(grid, dims);
    if (dims[COLLX_DIM_TP] != tp || dims[COLLX_DIM_CP] != cp || dims[COLLX_DIM_DP] != dp ||
        dims[COLLX_DIM_PP] != pp || dims[COLLX_DIM_EP] != 1)
      fail("dims wrong on rank " + std::to_string(rank));
    // Coordinates and their inverse for every rank.
    std::vector<Coords> all(static_cast<size_t>(world_size));
    for (int32_t r = 0; r < world_size; ++r) {
      Coords c{};
      if (collx_grid_coords(grid, r, c.data()) != COLLX_OK) fail("coords failed");
      if (megatron_rank(c, tp, cp, dp) != r || c[COLLX_DIM_EP] != 0)
        fail("coords of rank " + std::to_string(r) + " do not match Megatron's formula");
      int32_t back = -1;
      if (collx_grid_rank_of(grid, c.data(), &back) != COLLX_OK || back != r)
        fail("rank_of does not invert coords for rank " + std::to_string(r));
      all[static_cast<size_t>(r)] = c;
    }
    // Membership of each sub-communicator.
    for (uint32_t axes : kSets) {
      collx_comm_t sub = nullptr;
      if (collx_grid_comm(grid, axes, &sub) != COLLX_OK || !sub) {
        fail("grid_comm failed for axes " + std::to_string(axes));
        continue;
      }
      std::vector<int32_t> expected;
      for (int32_t r = 0; r < world_size; ++r) {
        bool same = true;
        for (int d = 0; d < COLLX_GRID_NUM_DIMS; ++d)
          if (!(axes & kBit[d]) && all[static_cast<size_t>(r)][d] != all[static_cast<size_t>(rank)][d]) same = false;
        if (same) expected.push_back(r);
      }
      int32_t size = 0, sub_rank = -1;
      collx_comm_size(sub, &size);
      collx_comm_rank(sub, &sub_rank);
      std::vector<int32_t> got(static_cast<size_t>(size), -1);
      int32_t me = rank;
      if (collx_allgather(&me, got.data(), 1, COLLX_INT32, sub, nullptr) != COLLX_OK)
        fail("allgather in sub-communicator failed: " + std::string(collx_last_error(sub)));
      if (got != expected)
        fail("rank " + std::to_string(rank) + ": wrong members for axes " + std::to_string(axes));
      if (sub_rank < 0 || got[static_cast<size_t>(sub_rank)] != rank) fail("sub rank order wrong");
    }
    EXPECT_EQ(collx_grid_destroy(grid), COLLX_OK);
  });
  for (const auto& f : failures) ADD_FAILURE() << f;
}

TEST(ParallelGrid, Tp2Dp2Pp2MatchesMegatron) { check_grid(8, 2, 1, 2, 2); }
TEST(ParallelGrid, Tp2Cp2Dp2MatchesMegatron) { check_grid(8, 2, 2, 2, 1); }
TEST(ParallelGrid, DpZeroIsTheRemainder) { check_grid(8, 2, 1, 0, 2); }

// Hard-coded groups (independent of the implementation's formula), non-default order:
// "pp-tp-dp" with pp=2, tp=2, dp=2 gives rank = pp + 2*tp + 4*dp.
// Every communicator of a non-default order is used twice (groups must stay usable in any
// order of use) and the grid is destroyed quickly (TCP close no longer waits 1 s per
// communicator for acknowledgements).
TEST(ParallelGrid, ExplicitOrderGroups) {
  ThreadRanks world(8, 20000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::mutex mu;
  std::vector<std::string> failures;
  world.run([&](int rank, collx_comm_t comm) {
    collx_grid_config_t cfg = make_config(2, 1, 2, 2, "pp-tp-dp");
    collx_grid_t grid = nullptr;
    ASSERT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_OK) << collx_grid_last_error(nullptr);
    auto members = [&](uint32_t axes) {
      collx_comm_t sub = nullptr;
      EXPECT_EQ(collx_grid_comm(grid, axes, &sub), COLLX_OK);
      int32_t size = 0;
      collx_comm_size(sub, &size);
      std::vector<int32_t> got(static_cast<size_t>(size));
      int32_t me = rank;
      EXPECT_EQ(collx_allgather(&me, got.data(), 1, COLLX_INT32, sub, nullptr), COLLX_OK);
      return got;
    };
    std::vector<std::vector<int32_t>> got;
    for (uint32_t a : kSets) got.push_back(members(a));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(members(kSets[i]), got[i]) << "second use of set " << kSets[i];
    const std::vector<int32_t>& tp = got[0];
    const std::vector<int32_t>& dp = got[2];
    const std::vector<int32_t>& pp = got[3];
    const std::vector<int32_t>& mp = got[5];
    int base_pp = rank & ~1, base_tp = rank & ~2, base_dp = rank & ~4, base_mp = rank & ~3;
    std::lock_guard<std::mutex> lock(mu);
    if (pp != std::vector<int32_t>{base_pp, base_pp + 1}) failures.push_back("pp group of " + std::to_string(rank));
    if (tp != std::vector<int32_t>{base_tp, base_tp + 2}) failures.push_back("tp group of " + std::to_string(rank));
    if (dp != std::vector<int32_t>{base_dp, base_dp + 4}) failures.push_back("dp group of " + std::to_string(rank));
    if (mp != std::vector<int32_t>{base_mp, base_mp + 1, base_mp + 2, base_mp + 3})
      failures.push_back("model-parallel group of " + std::to_string(rank));
    int32_t c[COLLX_GRID_NUM_DIMS];
    collx_grid_coords(grid, 5, c);  // 5 = pp 1 + tp 0 + dp 1
    if (c[COLLX_DIM_PP] != 1 || c[COLLX_DIM_TP] != 0 || c[COLLX_DIM_DP] != 1) failures.push_back("coords of 5");
    collx_grid_destroy(grid);
  });
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// Coordinates for "pp-tp-dp" (rank = pp + 2*tp + 4*dp), hard-coded; no sub-communicator
// is used, so the grid is destroyed quickly.
TEST(ParallelGrid, ExplicitOrderCoords) {
  ThreadRanks world(8, 20000);
  ASSERT_TRUE(world.ok()) << world.error();
  world.run([&](int rank, collx_comm_t comm) {
    collx_grid_config_t cfg = make_config(2, 1, 2, 2, "pp-tp-dp");
    collx_grid_t grid = nullptr;
    ASSERT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_OK) << collx_grid_last_error(nullptr);
    for (int32_t r = 0; r < 8; ++r) {
      int32_t c[COLLX_GRID_NUM_DIMS];
      ASSERT_EQ(collx_grid_coords(grid, r, c), COLLX_OK);
      EXPECT_EQ(c[COLLX_DIM_PP], r % 2);
      EXPECT_EQ(c[COLLX_DIM_TP], (r / 2) % 2);
      EXPECT_EQ(c[COLLX_DIM_DP], r / 4);
      EXPECT_EQ(c[COLLX_DIM_CP], 0);
      int32_t back = -1;
      EXPECT_EQ(collx_grid_rank_of(grid, c, &back), COLLX_OK);
      EXPECT_EQ(back, r);
    }
    collx_comm_t tp = nullptr;
    ASSERT_EQ(collx_grid_comm(grid, COLLX_AXIS_TP, &tp), COLLX_OK);
    int32_t tp_rank = -1;
    collx_comm_rank(tp, &tp_rank);
    EXPECT_EQ(tp_rank, (rank / 2) % 2);
    collx_grid_destroy(grid);
  });
}

TEST(ParallelGrid, DifferentConfigOnOneRankIsNamedOnEveryRank) {
  ThreadRanks world(4, 5000);
  ASSERT_TRUE(world.ok()) << world.error();
  std::atomic<int> named{0};
  world.run([&](int rank, collx_comm_t comm) {
    collx_grid_config_t cfg = make_config(rank == 2 ? 4 : 2, 1, 2, 1);
    collx_grid_t grid = nullptr;
    EXPECT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_ERR_INVALID_USAGE);
    EXPECT_EQ(grid, nullptr);
    std::string msg = collx_grid_last_error(nullptr);
    if (msg.find("rank 2") != std::string::npos && msg.find("tp=4") != std::string::npos &&
        msg.find("tp=2") != std::string::npos)
      ++named;
    else
      ADD_FAILURE() << "rank " << rank << ": " << msg;
  });
  EXPECT_EQ(named.load(), 4);
  // The world communicator stays usable; a matching config then works.
  world.run([&](int, collx_comm_t comm) {
    collx_grid_config_t cfg = make_config(2, 1, 0, 1, "tp-dp");
    collx_grid_t grid = nullptr;
    EXPECT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_OK) << collx_grid_last_error(nullptr);
    collx_grid_destroy(grid);
  });
}

TEST(ParallelGrid, BadArgumentsGiveInvalidArgOnEveryRank) {
  ThreadRanks world(4, 5000);
  ASSERT_TRUE(world.ok()) << world.error();
  struct Case {
    collx_grid_config_t cfg;
    const char* needle;
  };
  std::vector<Case> cases = {
      {make_config(3, 1, 1, 1), "world size is 4"},         // bad product
      {make_config(2, 1, 4, 1), "world size is 4"},         // bad product
      {make_config(3, 1, 0, 1), "not a multiple"},       // remainder impossible
      {make_config(2, 1, 2, 1, "tp-xx-dp"), "unknown token"},
      {make_config(2, 1, 2, 1, "tp-dp-tp"), "twice"},
      {make_config(2, 1, 2, 1, "dp-pp"), "\"tp\" is missing"},
      {make_config(0, 1, 2, 1), "tp is 0"},
  };
  Case ep = {make_config(2, 1, 2, 1), "ep = 3 does not divide"};  // more in parallel_grid_expert_test
  ep.cfg.ep = 3;
  cases.push_back(ep);
  for (const Case& k : cases) {
    world.run([&](int, collx_comm_t comm) {
      collx_grid_t grid = nullptr;
      EXPECT_EQ(collx_grid_create(comm, &k.cfg, &grid), COLLX_ERR_INVALID_ARG) << k.needle;
      EXPECT_NE(std::string(collx_grid_last_error(nullptr)).find(k.needle), std::string::npos)
          << collx_grid_last_error(nullptr);
    });
  }
  world.run([&](int, collx_comm_t comm) {
    collx_grid_config_t cfg = make_config(2, 1, 2, 1);
    collx_grid_t grid = nullptr;
    EXPECT_EQ(collx_grid_create(comm, nullptr, &grid), COLLX_ERR_INVALID_ARG);
    ASSERT_EQ(collx_grid_create(comm, &cfg, &grid), COLLX_OK);
    collx_comm_t sub = nullptr;
    EXPECT_EQ(collx_grid_comm(grid, COLLX_AXIS_CP | COLLX_AXIS_PP, &sub), COLLX_ERR_INVALID_ARG);
    EXPECT_NE(std::string(collx_grid_last_error(grid)).find("CP|PP"), std::string::npos)
        << collx_grid_last_error(grid);
    EXPECT_EQ(collx_grid_comm(grid, 0, &sub), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(collx_grid_comm(grid, COLLX_AXIS_TP | COLLX_AXIS_EP, &sub), COLLX_OK);  // expert TP x EP
    int32_t c[COLLX_GRID_NUM_DIMS] = {0, 0, 0, 2, 0};
    int32_t r = -1;
    EXPECT_EQ(collx_grid_rank_of(grid, c, &r), COLLX_ERR_INVALID_ARG);
    EXPECT_EQ(collx_grid_coords(grid, 4, c), COLLX_ERR_INVALID_ARG);
    collx_grid_destroy(grid);
  });
}

}  // namespace
