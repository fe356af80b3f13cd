// All-reduce on every world size, count, datatype, op, in-place mode and algorithm equals
// the reference.
#include "tests/fast/sweep.h"

namespace collx {
namespace testing {
namespace {

class AllreduceSweep : public ::testing::TestWithParam<SweepWorld> {};

TEST_P(AllreduceSweep, EveryCaseMatchesReference) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> cases;
  const std::vector<collx_algorithm_t> algorithms = with_shared_memory_on_shm(
      GetParam().transport.name, {COLLX_ALGO_RING, COLLX_ALGO_RECURSIVE_DOUBLING, COLLX_ALGO_RABENSEIFNER});
  for (size_t count : sweep_counts())
    for (collx_datatype_t dt : sweep_datatypes())
      for (collx_op_t op : sweep_ops())
        if (sweep_case_wanted(count, dt, op))
        for (bool in_place : {false, true})
          for (collx_algorithm_t algo : algorithms) {
            CollCase c;
            c.coll = COLLX_COLL_ALLREDUCE;
            c.count = count;
            c.datatype = dt;
            c.op = op;
            c.in_place = in_place;
            c.algorithm = algo;
            cases.push_back(c);
          }
  run_cases(world, cases);
}

TEST_P(AllreduceSweep, AutomaticChoiceMatchesReferenceAcrossTheCutOver) {
  ThreadRanks world(GetParam().size, 60000, GetParam().transport.mask);
  ASSERT_TRUE(world.ok()) << world.error();
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{16 << 10}, size_t{64 << 10} + 1, size_t{256 << 10}}) {
    CollCase c;
    c.count = count;
    c.datatype = COLLX_FLOAT32;
    cases.push_back(c);
  }
  run_cases(world, cases);
}

INSTANTIATE_TEST_SUITE_P(Worlds, AllreduceSweep, ::testing::ValuesIn(sweep_worlds()), SweepWorldName());

}  // namespace
}  // namespace testing
}  // namespace collx
