// How TCP connections notice a peer that went silent (network partition, host gone without a
// FIN or RST): TCP keepalive probes an idle connection; sent data that stays unacknowledged
// is bounded by the TCP transport's own check (unacked_timeout_ms, transports/tcp) or by the
// kernel's TCP_USER_TIMEOUT. Without them a silent peer is only noticed at the blocking call's
// deadline (COLLX_TIMEOUT_MS, 10 minutes by default) or after ~15 minutes of kernel
// retransmissions. The values come from COLLX_TCP_KEEPALIVE_IDLE_S, _INTERVAL_S, _COUNT,
// COLLX_TCP_UNACKED_TIMEOUT_MS and COLLX_TCP_USER_TIMEOUT_MS.
//
// Why transport sockets do not use TCP_USER_TIMEOUT by default: since Linux 5.11 it also drops
// a connection whose peer keeps its receive window at zero for that long, although the peer's
// kernel answers every zero-window probe. A healthy rank that stops reading for a while (a
// checkpoint, an evaluation) while a peer has more than a socket buffer queued to it would be
// reported unreachable. The transport's check only fails a connection on which nothing at all
// was acknowledged, which a live peer's kernel never lets happen.
#pragma once

#include <cstdint>

#include "lib/common/status.h"

namespace collx {

struct SocketLiveness {
  int keepalive_idle_s = 0;      // 0: keepalive off (the other two keepalive fields unused)
  int keepalive_interval_s = 0;
  int keepalive_count = 0;
  int user_timeout_ms = 0;       // TCP_USER_TIMEOUT; 0: the kernel's default (~15 minutes)
  // Not a socket option: the TCP transport fails a peer whose connection has data in flight
  // and received no ACK at all for this long (checked about once a second); 0: off.
  int unacked_timeout_ms = 0;

  // The longest a silent peer can go unreported on a transport connection with these
  // options, in ms: the worse of an idle connection (keepalive) and one with data in flight
  // (the unacknowledged-data check or the user timeout, whichever is shorter). -1 when one of
  // the two is not bounded by these options.
  int64_t silent_peer_report_ms() const;

  // The options of a store socket: TCP_USER_TIMEOUT is set there (to unacked_timeout_ms when
  // user_timeout_ms is 0). The zero-window trap cannot catch a store connection: its
  // messages are small and the server reads every connection continuously, so no receive
  // window fills up; and store sockets are blocking calls without an engine to check them.
  SocketLiveness for_store() const;
};

// How often the TCP transport checks its connections for unacknowledged data, in ms: part of
// the time a silent peer with data in flight takes to be reported.
constexpr int kUnackedCheckPeriodMs = 1000;

// Reads and checks the five settings (COLLX_ERR_INVALID_ARG naming the variable when one is
// malformed or out of range).
Status socket_liveness_from_settings(SocketLiveness* out);

// Sets SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT and TCP_USER_TIMEOUT on a TCP
// socket (before connect or listen: accepted sockets inherit them from their listener).
// COLLX_ERR_SYSTEM naming the option when the kernel refuses one. Nothing to do for a
// default-constructed value.
Status apply_socket_liveness(int fd, const SocketLiveness& liveness);

}  // namespace collx
