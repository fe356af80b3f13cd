// The fast tier's sweep: world sizes x counts x datatypes x ops x in-place x algorithms, each
// case checked against the double-precision reference. Ranks are threads over the in-memory
// store; the transport is real TCP over loopback.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/collective_check.h"

namespace collx {
namespace testing {

inline const std::vector<int>& sweep_world_sizes() {
  static const std::vector<int> sizes = {1, 2, 3, 4, 5, 8};
  return sizes;
}
inline const std::vector<size_t>& sweep_counts() {
  static const std::vector<size_t> counts = {0, 1, 7, 1000, (size_t{1} << 20) + 3};
  return counts;
}
inline std::vector<collx_datatype_t> sweep_datatypes() {
  std::vector<collx_datatype_t> all;
  for (int t = 0; t < COLLX_NUM_DATATYPES; ++t) all.push_back(static_cast<collx_datatype_t>(t));
  return all;
}
inline std::vector<collx_op_t> sweep_ops() {
  std::vector<collx_op_t> all;
  for (int o = 0; o < COLLX_NUM_OPS; ++o) all.push_back(static_cast<collx_op_t>(o));
  return all;
}

// Runs every case, stopping after a handful of failing ones so a broken build reports
// quickly instead of printing thousands of failures.
inline void run_cases(ThreadRanks& world, const std::vector<CollCase>& cases) {
  int failing = 0;
  for (const CollCase& c : cases) {
    SCOPED_TRACE(c.name() + " on " + std::to_string(world.size()) + " ranks");
    if (run_and_check(world, c) != 0 && ++failing >= 5) {
      ADD_FAILURE() << "stopping after 5 failing cases";
      return;
    }
  }
}

}  // namespace testing
}  // namespace collx
