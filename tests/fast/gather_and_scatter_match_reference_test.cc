// Gather and scatter (every root, in place on the root, blocking and nonblocking) on every
// world size, count and element size equal the reference.
#include "tests/fast/sweep.h"

namespace collx {
namespace testing {
namespace {

class GatherScatterSweep : public ::testing::TestWithParam<SweepWorld> {
 protected:
  // Data movement depends on the element size only: one datatype per size (those the sweep
  // keeps at its large count). Every root at count 7; the other counts from the first and
  // last rank, which keeps the tier fast. Nonblocking for the small counts.
  std::vector<CollCase> cases(collx_coll_t coll, int world_size) const {
    std::vector<CollCase> out;
    for (size_t count : sweep_counts())
      for (collx_datatype_t dt : sweep_datatypes())
        if (sweep_datatype_wanted(kSweepLargeCount, dt))
          for (bool in_place : {false, true})
            for (int root = 0; root < world_size; ++root) {
              if (count != 7 && root != 0 && root != world_size - 1) continue;
              // The large count once per in-place mode: out of place to the last rank, in
              // place to the first.
              if (count == kSweepLargeCount && root != (in_place ? 0 : world_size - 1)) continue;
              CollCase c;
              c.coll = coll;
              c.count = count;
              c.datatype = dt;
              c.in_place = in_place;
              c.root = root;
              c.algorithm = COLLX_ALGO_DIRECT;
              c.nonblocking = count <= 1000 && (root + static_cast<int>(dt)) % 2 == 1;
              out.push_back(c);
            }
    return out;
  }
};

TEST_P(GatherScatterSweep, GatherToEveryRootMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  run_cases(world, cases(COLLX_COLL_GATHER, world.size()));
}

TEST_P(GatherScatterSweep, ScatterFromEveryRootMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  run_cases(world, cases(COLLX_COLL_SCATTER, world.size()));
}

TEST_P(GatherScatterSweep, AutomaticChoiceGathersAndScatters) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> auto_cases;
  for (collx_coll_t coll : {COLLX_COLL_GATHER, COLLX_COLL_SCATTER}) {
    CollCase c;
    c.coll = coll;
    c.count = 513;
    c.datatype = COLLX_INT32;
    c.root = world.size() - 1;
    c.algorithm = COLLX_ALGO_AUTO;
    auto_cases.push_back(c);
  }
  run_cases(world, auto_cases);
}

INSTANTIATE_TEST_SUITE_P(Worlds, GatherScatterSweep, ::testing::ValuesIn(sweep_worlds()), SweepWorldName());

}  // namespace
}  // namespace testing
}  // namespace collx
