// The transports a test tier runs over: every one built into this library that can connect
// ranks of one host (tcp, shm, and ucx when built). Tests parameterized by it run the same
// checks over each, so a transport cannot silently lose coverage when another becomes the
// default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collx/collx.h"

namespace collx {
namespace testing {

struct TransportUnderTest {
  std::string name;  // "tcp", "shm", "ucx": usable as a gtest parameter name
  uint32_t mask;     // COLLX_TRANSPORT_* bit for config->transports
};

std::vector<TransportUnderTest> transports_under_test();

// The algorithms to run on a communicator over `transport` ("tcp", "shm", "ucx"): `base`,
// plus COLLX_ALGO_SHARED_MEMORY when the transport is shm (the only one it runs over). The
// fast and process sweeps take their algorithm lists from here, so shared memory is swept
// wherever it can run.
inline std::vector<collx_algorithm_t> with_shared_memory_on_shm(const std::string& transport,
                                                                std::vector<collx_algorithm_t> base) {
  if (transport == "shm") base.push_back(COLLX_ALGO_SHARED_MEMORY);
  return base;
}

// For INSTANTIATE_TEST_SUITE_P(..., ::testing::ValuesIn(transports_under_test()), transport_name).
struct TransportName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return info.param.name;
  }
};

}  // namespace testing
}  // namespace collx
