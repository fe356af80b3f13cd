// How TCP connections notice a peer that went silent (network partition, host gone without a
// FIN or RST): TCP keepalive probes an idle connection, TCP_USER_TIMEOUT bounds how long sent
// data may stay unacknowledged. Without them a silent peer is only noticed at the blocking
// call's deadline (COLLX_TIMEOUT_MS, 10 minutes by default) or after ~15 minutes of kernel
// retransmissions. Applied to every transport and store socket; the values come from
// COLLX_TCP_KEEPALIVE_IDLE_S, _INTERVAL_S, _COUNT and COLLX_TCP_USER_TIMEOUT_MS.
#pragma once

#include <cstdint>

#include "lib/common/status.h"

namespace collx {

struct SocketLiveness {
  int keepalive_idle_s = 0;      // 0: keepalive off (the other two keepalive fields unused)
  int keepalive_interval_s = 0;
  int keepalive_count = 0;
  int user_timeout_ms = 0;       // 0: the kernel's default (retransmissions for ~15 minutes)

  // The longest a silent peer can go unreported on a connection with these options, in ms:
  // the worse of an idle connection (keepalive) and one with data in flight (user timeout).
  // -1 when one of the two is not bounded by these options.
  int64_t silent_peer_report_ms() const;
};

// Reads and checks the four settings (COLLX_ERR_INVALID_ARG naming the variable when one is
// malformed or out of range).
Status socket_liveness_from_settings(SocketLiveness* out);

// Sets SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT and TCP_USER_TIMEOUT on a TCP
// socket (before connect or listen: accepted sockets inherit them from their listener).
// COLLX_ERR_SYSTEM naming the option when the kernel refuses one. Nothing to do for a
// default-constructed value.
Status apply_socket_liveness(int fd, const SocketLiveness& liveness);

}  // namespace collx
