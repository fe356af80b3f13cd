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

// For INSTANTIATE_TEST_SUITE_P(..., ::testing::ValuesIn(transports_under_test()), transport_name).
struct TransportName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return info.param.name;
  }
};

}  // namespace testing
}  // namespace collx
