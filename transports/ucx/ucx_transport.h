// The UCX transport: UCP tag matching over whatever UCX finds (InfiniBand/RoCE verbs, shared
// memory, TCP, ...), one UCP context + worker per transport (per communicator), one endpoint
// per peer. No progress thread: waiters drive it, sleeping on the worker's event fd when idle.
// See transports/transport.h for the semantics and transports/ucx/README.md for the design.
//
// Built only when pkg-config finds `ucx` (COLLX_HAVE_UCX); otherwise create_ucx_transport
// returns COLLX_ERR_UNSUPPORTED.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {

struct UcxTransportParams {
  int rank = 0, size = 1;
  uint64_t comm_id = 0;                        // checked in every peer's address blob
  transport::Bootstrap* bootstrap = nullptr;   // exchanges worker addresses (one allgather)
  std::string bootstrap_name = "ucx";          // name passed to bootstrap->allgather
  transport::DescribeFn describe;              // renders OpDesc in error messages (may be empty)
  Deadline deadline = Deadline::never();       // bounds setup (address exchange, endpoints, wire-up)
};

// Whether this build has the UCX transport.
bool ucx_transport_built();

// Creates the UCP context and worker, exchanges worker addresses through params.bootstrap
// and creates an endpoint to every rank (itself included), connected before it returns (a
// note each way with every peer), all within params.deadline.
Status create_ucx_transport(const UcxTransportParams& params, std::unique_ptr<transport::Transport>* out);

}  // namespace collx
