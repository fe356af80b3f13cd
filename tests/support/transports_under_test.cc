#include "tests/support/transports_under_test.h"

#include "transports/ucx/ucx_transport.h"

namespace collx {
namespace testing {

std::vector<TransportUnderTest> transports_under_test() {
  std::vector<TransportUnderTest> all = {{"tcp", COLLX_TRANSPORT_TCP}, {"shm", COLLX_TRANSPORT_SHM}};
  if (ucx_transport_built()) all.push_back({"ucx", COLLX_TRANSPORT_UCX});
  return all;
}

}  // namespace testing
}  // namespace collx
