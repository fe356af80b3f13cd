// One collective case run on every rank of a ThreadRanks world and checked element by
// element against the double-precision reference (tests/support/reference.h).
#pragma once

#include <cstddef>
#include <string>

#include "collx/collx.h"
#include "tests/support/thread_ranks.h"

namespace collx {
namespace testing {

struct CollCase {
  collx_coll_t coll = COLLX_COLL_ALLREDUCE;
  size_t count = 0;  // as passed to the call (per rank for reduce_scatter/allgather/alltoall/gather/scatter)
  collx_datatype_t datatype = COLLX_FLOAT32;
  collx_op_t op = COLLX_SUM;
  bool in_place = false;
  collx_algorithm_t algorithm = COLLX_ALGO_AUTO;
  int root = 0;
  bool nonblocking = false;
  double premul = 2.0;
  unsigned salt = 0;

  std::string name() const;
};

// Runs the case on every rank; records gtest failures naming the case, the rank and the
// first wrong element. Returns the number of wrong elements over all ranks.
size_t run_and_check(ThreadRanks& world, const CollCase& c);

}  // namespace testing
}  // namespace collx
