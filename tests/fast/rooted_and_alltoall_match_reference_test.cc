// Broadcast and reduce (every root), and all-to-all, on every world size, count and datatype
// equal the reference.
#include "tests/fast/sweep.h"

namespace collx {
namespace testing {
namespace {

class RootedSweep : public ::testing::TestWithParam<SweepWorld> {};

TEST_P(RootedSweep, BroadcastFromEveryRootMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> cases;
  for (size_t count : sweep_counts())
    for (collx_datatype_t dt : sweep_datatypes())
      if (sweep_datatype_wanted(count, dt))
      for (bool in_place : {false, true})
        for (int root = 0; root < world.size(); ++root) {
          // Every root for small counts; the large count from two roots keeps the tier fast.
          if (count > 1000 && root != 0 && root != world.size() - 1) continue;
          CollCase c;
          c.coll = COLLX_COLL_BROADCAST;
          c.count = count;
          c.datatype = dt;
          c.in_place = in_place;
          c.root = root;
          c.algorithm = COLLX_ALGO_BINOMIAL;
          cases.push_back(c);
        }
  run_cases(world, cases);
}

TEST_P(RootedSweep, ReduceToEveryRootMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> cases;
  for (size_t count : sweep_counts())
    for (collx_datatype_t dt : sweep_datatypes())
      for (collx_op_t op : sweep_ops())
        if (sweep_case_wanted(count, dt, op))
        for (bool in_place : {false, true}) {
          CollCase c;
          c.coll = COLLX_COLL_REDUCE;
          c.count = count;
          c.datatype = dt;
          c.op = op;
          c.in_place = in_place;
          c.root = static_cast<int>((count + static_cast<size_t>(op)) % static_cast<size_t>(world.size()));
          c.algorithm = COLLX_ALGO_BINOMIAL;
          cases.push_back(c);
        }
  run_cases(world, cases);
}

TEST_P(RootedSweep, AlltoallMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> cases;
  for (size_t count : sweep_counts())
    for (collx_datatype_t dt : sweep_datatypes()) {
      if (!sweep_datatype_wanted(count, dt)) continue;
      CollCase c;
      c.coll = COLLX_COLL_ALLTOALL;
      c.count = count;
      c.datatype = dt;
      c.algorithm = COLLX_ALGO_PAIRWISE;
      cases.push_back(c);
    }
  run_cases(world, cases);
}

INSTANTIATE_TEST_SUITE_P(Worlds, RootedSweep, ::testing::ValuesIn(sweep_worlds()), SweepWorldName());

}  // namespace
}  // namespace testing
}  // namespace collx
