// Connection setup of the TCP transport: every rank connects `sockets_per_peer` sockets to
// each lower rank and accepts them from each higher rank, all at once in one poll loop (so
// no rank waits on another's order), with a HELLO / HELLO_ACK handshake per socket.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/common/deadline.h"
#include "lib/common/socket_liveness.h"
#include "lib/common/status.h"
#include "transports/tcp/socket_util.h"
#include "transports/tcp/wire.h"

namespace collx {
namespace tcp {

struct MeshParams {
  int rank = 0;
  int size = 1;
  uint64_t comm_id = 0;
  int sockets_per_peer = 1;
  size_t socket_buffer_bytes = 0;  // SO_SNDBUF/SO_RCVBUF of connecting sockets; 0 = kernel default
  Deadline deadline = Deadline::never();
  int hello_timeout_ms = 5000;
  // The job token (COLLX_JOB_TOKEN); empty = none. With one, no socket joins the mesh before
  // both ends proved they know it; a connection that fails is dropped with a warning.
  std::string job_token;
  SocketLiveness liveness;  // set on every connecting socket (accepted ones inherit the listener's)
};

// [peer][socket index] -> connected, non-blocking, TCP_NODELAY socket (empty for self).
using MeshSockets = std::vector<std::vector<UniqueFd>>;

// Connects the mesh. `addresses[r]` is rank r's listen address; `listen_fd` is this rank's
// (non-blocking) listener. Connections that present a bad HELLO are dropped with a warning;
// failures to reach a peer, a rejected handshake or the deadline are errors naming the
// peer, its address and, on timeout, every connection still missing.
Status build_mesh(const MeshParams& params, int listen_fd, const std::vector<SocketAddress>& addresses,
                  MeshSockets* out);

// Why an accepted connection's HELLO is unacceptable ("" when it is fine); `is_connected`
// says whether a (validated) slot is taken already. *fatal: the HELLO is from this communicator but its
// configuration differs (setup cannot succeed). Shared by setup and the late-connection
// handler of the running transport.
std::string hello_rejection(const Hello& hello, const MeshParams& params,
                            const std::function<bool(int peer, int index)>& is_connected, bool* fatal);

}  // namespace tcp
}  // namespace collx
