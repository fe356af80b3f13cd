// Reduce-scatter and all-gather on every world size, count, datatype, op, in-place mode and
// algorithm (ring; shared memory where the transport is shm) equal the reference.
#include "tests/fast/sweep.h"

namespace collx {
namespace testing {
namespace {

class ScatterGatherSweep : public ::testing::TestWithParam<SweepWorld> {
 protected:
  std::vector<collx_algorithm_t> algorithms() const {
    return with_shared_memory_on_shm(GetParam().transport.name, {COLLX_ALGO_RING});
  }
};

TEST_P(ScatterGatherSweep, ReduceScatterMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> cases;
  for (size_t count : sweep_counts())
    for (collx_datatype_t dt : sweep_datatypes())
      for (collx_op_t op : sweep_ops())
        if (sweep_case_wanted(count, dt, op))
        for (bool in_place : {false, true})
          for (collx_algorithm_t algo : algorithms()) {
            CollCase c;
            c.coll = COLLX_COLL_REDUCE_SCATTER;
            c.count = count;
            c.datatype = dt;
            c.op = op;
            c.in_place = in_place;
            c.algorithm = algo;
            cases.push_back(c);
          }
  run_cases(world, cases);
}

TEST_P(ScatterGatherSweep, AllgatherMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> cases;
  for (size_t count : sweep_counts())
    for (collx_datatype_t dt : sweep_datatypes())
      if (sweep_datatype_wanted(count, dt))
      for (bool in_place : {false, true})
        for (collx_algorithm_t algo : algorithms()) {
          CollCase c;
          c.coll = COLLX_COLL_ALLGATHER;
          c.count = count;
          c.datatype = dt;
          c.in_place = in_place;
          c.algorithm = algo;
          cases.push_back(c);
        }
  run_cases(world, cases);
}

INSTANTIATE_TEST_SUITE_P(Worlds, ScatterGatherSweep, ::testing::ValuesIn(sweep_worlds()), SweepWorldName());

}  // namespace
}  // namespace testing
}  // namespace collx
