// The shared-memory transport: for ranks on one host. Each rank owns a POSIX shared-memory
// segment holding one ring per sender; small messages travel inline in ring cells, large ones
// by rendezvous and a single cross-memory-attach copy (process_vm_readv), falling back to
// chunks through the ring where CMA is not permitted. No progress thread: waiters drive it.
// See transports/transport.h for the semantics and transports/shm/README.md for the design.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lib/common/deadline.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {

struct ShmTransportParams {
  int rank = 0, size = 1;
  uint64_t comm_id = 0;
  transport::Bootstrap* bootstrap = nullptr;   // exchanges segment names (two allgathers)
  std::string bootstrap_name = "shm";          // prefix of the allgather names
  transport::DescribeFn describe;              // renders OpDesc in error messages (may be empty)
  size_t unexpected_max_bytes = 256u << 20;    // buffered unexpected eager payload
  size_t eager_max_bytes = 64u << 10;          // larger messages use rendezvous
  // Never use process_vm_readv: large messages go through the ring in chunks (tests; also
  // COLLX_SHM_NO_CMA=1 in the environment).
  bool force_ring_copy = false;
  Deadline deadline = Deadline::never();       // bounds setup
};

// Creates this rank's segment, exchanges names through params.bootstrap, maps every peer's
// segment and unlinks its own once everyone has mapped it.
Status create_shm_transport(const ShmTransportParams& params, std::unique_ptr<transport::Transport>* out);

}  // namespace collx
