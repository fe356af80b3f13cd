// The table of the transports this library has: what lib/core iterates to create a
// communicator's transport without knowing any transport's own header. Each row maps the
// communicator's generic set-up (TransportSetup) onto its transport's parameters and
// settings (COLLX_TCP_*, COLLX_UNEXPECTED_MAX, ...).
//
// Adding a transport: its folder under transports/, a create function taking TransportSetup,
// a row in factory.cc at the place in the order where it should win (lib/core takes the
// first row that is allowed, built and usable for the communicator's placement), and a
// COLLX_TRANSPORT_* bit in include/collx/collx.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {
namespace transport {

// What lib/core knows and decides when it creates a communicator's transport.
struct TransportSetup {
  int rank = 0, size = 1;
  uint64_t comm_id = 0;             // both ends check it while connecting
  std::string comm_name;            // the communicator's name, for messages and logs
  Bootstrap* bootstrap = nullptr;   // exchanges addresses / segment names during creation
  DescribeFn describe;              // renders OpDesc in error messages
  Deadline deadline = Deadline::never();  // bounds creation
  bool single_host = false;         // every rank of the communicator is on this host
  // Network transports, ranks on several hosts: "host" or "host:port" that every rank
  // reaches (the store's address), to find the local interface that routes there; "" when
  // unknown.
  std::string route_to_host;
  // Network transports, ranks on several hosts and no interface configured: given the local
  // IP that routes to route_to_host, the interface spec to use instead ("=eth1"), or "" to
  // keep the route's. May be empty. Placement policy (topology) is the core's, not the
  // transport's.
  std::function<std::string(const std::string& route_ip)> pick_interface;
};

struct TransportFactory {
  uint32_t kind;      // COLLX_TRANSPORT_* bit
  const char* name;   // as COLLX_TRANSPORTS spells it, and Transport::name()
  bool single_host_only;  // usable only when every rank is on this host
  bool (*built)();    // compiled into this library (optional dependencies)
  Status (*create)(const TransportSetup& setup, std::unique_ptr<Transport>* out);
};

// Every transport, in the order lib/core prefers them. Immutable; safe from any thread.
const TransportFactory* transport_factories(size_t* count);

}  // namespace transport
}  // namespace collx
