// The fast tier's sweep: world sizes x counts x datatypes x ops x in-place x algorithms, each
// case checked against the double-precision reference. Ranks are threads over the in-memory
// store; the transports are the real ones (shm, TCP over loopback, UCX when built).
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "tests/support/collective_check.h"
#include "tests/support/sweep_limits.h"
#include "tests/support/transports_under_test.h"

namespace collx {
namespace testing {

inline const std::vector<int>& sweep_world_sizes() {
  static const std::vector<int> sizes = {1, 2, 3, 4, 5, 8};
  return sizes;
}
// A world to sweep: its size and transport. Every size runs over every transport built
// in for sizes 2, 3 and 5 (one pair, an odd ring, a non-power of two with folding), and over
// shm alone for the rest: the algorithms do not depend on the transport, what a transport
// adds (message sizes, ordering, unexpected messages, rendezvous) those sizes exercise.
struct SweepWorld {
  int size;
  TransportUnderTest transport;
};
inline std::vector<SweepWorld> sweep_worlds() {
  std::vector<SweepWorld> worlds;
  for (int size : sweep_world_sizes()) {
    for (const TransportUnderTest& t : transports_under_test()) {
      const bool every_transport = size == 2 || size == 3 || size == 5;
      if (t.name == "shm" || every_transport) worlds.push_back({size, t});
    }
  }
  return worlds;
}
inline void PrintTo(const SweepWorld& world, std::ostream* os) {
  *os << world.size << " ranks over " << world.transport.name;
}
struct SweepWorldName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return info.param.transport.name + "_" + std::to_string(info.param.size);
  }
};

// The large count: chunking, pipelining, rendezvous, several shared-memory rounds, direct
// reads, uneven blocks (smaller under sanitizers: tests/support/sweep_limits.h).
constexpr size_t kSweepLargeCount = kLargeSweepCount;

inline const std::vector<size_t>& sweep_counts() {
  static const std::vector<size_t> counts = {0, 1, 7, 1000, kSweepLargeCount};
  return counts;
}
inline bool sweep_case_wanted(size_t count, collx_datatype_t dt, collx_op_t op = COLLX_SUM) {
  return large_count_pair_wanted(count, dt, op);
}

// Collectives without an op (data movement) at the large count: one datatype per element size.
inline bool sweep_datatype_wanted(size_t count, collx_datatype_t dt) {
  if (count < (size_t{1} << 16)) return true;
  return dt == COLLX_UINT8 || dt == COLLX_BFLOAT16 || dt == COLLX_FLOAT32 || dt == COLLX_INT64;
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
