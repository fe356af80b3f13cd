// The TCP transport: a full mesh of TCP connections between the ranks of a communicator,
// `sockets_per_peer` per pair, driven by epoll from the threads that wait (no progress
// thread). See transports/transport.h for the semantics every transport provides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "lib/common/deadline.h"
#include "lib/common/socket_liveness.h"
#include "lib/common/status.h"
#include "transports/transport.h"

namespace collx {

struct TcpTransportParams {
  int rank = 0, size = 1;
  uint64_t comm_id = 0;                        // both ends check it in the handshake
  transport::Bootstrap* bootstrap = nullptr;   // exchanges listen addresses (allgather)
  std::string bootstrap_name = "tcp";          // name passed to bootstrap->allgather
  transport::DescribeFn describe;              // renders OpDesc in error messages (may be empty)
  int sockets_per_peer = 2;                    // COLLX_TCP_NSOCKS
  size_t stripe_min_bytes = 256 << 10;         // COLLX_TCP_STRIPE_MIN
  size_t unexpected_max_bytes = 256u << 20;    // COLLX_UNEXPECTED_MAX
  size_t socket_buffer_bytes = 4u << 20;       // COLLX_TCP_SOCKBUF; 0 = kernel autotuning
  std::string ifname;                          // COLLX_SOCKET_IFNAME: "eth,ib", "^docker", "=eth0"
  // When ifname is empty: listen on the local address that routes to this host ("host" or
  // "host:port"); empty or a loopback host -> 127.0.0.1.
  std::string route_to_host;
  Deadline deadline = Deadline::never();       // bounds connection setup
  // A connection to the listen port must present its HELLO within this time or is dropped.
  int hello_timeout_ms = 5000;
  // COLLX_JOB_TOKEN: every connection proves both ends know it (tcp_mesh.h); empty = none.
  std::string job_token;
  // Keepalive and user timeout of every socket (COLLX_TCP_KEEPALIVE_*, COLLX_TCP_USER_TIMEOUT_MS)
  // and the engine's unacknowledged-data window (COLLX_TCP_UNACKED_TIMEOUT_MS, tcp_unacked.cc);
  // default-constructed: the kernel's defaults and no window.
  SocketLiveness liveness;
};

// Fills sockets_per_peer, stripe_min_bytes, unexpected_max_bytes, socket_buffer_bytes and
// ifname from COLLX_TCP_NSOCKS, COLLX_TCP_STRIPE_MIN, COLLX_UNEXPECTED_MAX,
// COLLX_TCP_SOCKBUF and COLLX_SOCKET_IFNAME, job_token from COLLX_JOB_TOKEN and liveness from
// COLLX_TCP_KEEPALIVE_*, COLLX_TCP_UNACKED_TIMEOUT_MS and COLLX_TCP_USER_TIMEOUT_MS.
Status load_tcp_settings(TcpTransportParams* params);

class TcpTransport : public transport::Transport {
 public:
  // "ip:port" of the listener the other ranks connected to.
  virtual std::string listen_address() const = 0;
};

// Opens the listener, exchanges addresses through params.bootstrap and connects the mesh,
// all within params.deadline.
Status create_tcp_transport(const TcpTransportParams& params, std::unique_ptr<TcpTransport>* out);

}  // namespace collx
