// What the transport conformance suite runs on: one factory per transport (tcp, shm, and ucx
// when built) creating the connected transports of an in-process job, ranks as threads
// sharing a BoardBootstrap. Header-only, like the other transport test helpers.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "transports/conformance/transport_test_util.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/ucx/ucx_transport.h"

namespace collx {
namespace conformance {

using namespace transport_test;  // NOLINT: the suite is written in terms of these helpers

struct Flavor {
  std::string name;  // gtest parameter name
  CreateFn create;
};

inline std::vector<Flavor> flavors() {
  std::vector<Flavor> all;
  all.push_back({"tcp", [](int rank, int size, uint64_t comm, transport::Bootstrap* boot, TransportPtr* out) {
                   std::unique_ptr<TcpTransport> t;
                   Status s = create_tcp_transport(job_params<TcpTransportParams>(rank, size, comm, boot), &t);
                   *out = std::move(t);
                   return s;
                 }});
  all.push_back({"shm", [](int rank, int size, uint64_t comm, transport::Bootstrap* boot, TransportPtr* out) {
                   return create_shm_transport(job_params<ShmTransportParams>(rank, size, comm, boot), out);
                 }});
  if (ucx_transport_built()) {
    all.push_back({"ucx", [](int rank, int size, uint64_t comm, transport::Bootstrap* boot, TransportPtr* out) {
                     return create_ucx_transport(job_params<UcxTransportParams>(rank, size, comm, boot), out);
                   }});
  }
  return all;
}

// gtest prints parameters of failed tests: the name, not the bytes.
inline void PrintTo(const Flavor& flavor, std::ostream* os) { *os << flavor.name; }

struct FlavorName {
  std::string operator()(const ::testing::TestParamInfo<Flavor>& info) const { return info.param.name; }
};

inline void run_job(const Flavor& flavor, int size, const std::function<void(int, transport::Transport*)>& fn) {
  run_thread_job(size, flavor.create, fn);
}

inline OpDesc p2p() { return OpDesc{}; }

inline bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

}  // namespace conformance
}  // namespace collx
