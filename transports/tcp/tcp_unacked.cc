// The TCP engine's check for peers that stopped acknowledging: a connection with sent data in
// flight on which no ACK of any kind arrived for unacked_timeout_ms fails its peer as
// unreachable, as a kernel ETIMEDOUT would.
//
// Why not TCP_USER_TIMEOUT: since Linux 5.11 it also drops a connection whose peer keeps a
// zero receive window (a live rank busy elsewhere while a large message is queued to it).
// A live peer's kernel acknowledges every zero-window probe, so tcpi_last_ack_recv stays
// small there; in a partition nothing is acknowledged and it only grows.
//
// Cost: one clock read per driver round; at most once per kUnackedCheckPeriodMs, one
// getsockopt(TCP_INFO) per connection.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

#include "lib/common/log.h"
#include "transports/tcp/tcp_engine.h"

namespace collx {
namespace tcp {

void TcpEngine::check_unacked_data() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_unacked_check_) return;
  next_unacked_check_ = now + std::chrono::milliseconds(kUnackedCheckPeriodMs);
  for (Peer& p : peers_) {
    if (p.departed) continue;
    for (auto& s : p.sockets) {
      check_unacked_socket(*s, now);
      if (!poison_.ok()) return;
    }
  }
}

void TcpEngine::check_unacked_socket(Socket& s, std::chrono::steady_clock::time_point now) {
  if (s.wrote_since_check) {
    s.wrote_since_check = false;
    s.last_write_checked = now;
  }
  if (!s.fd.valid() || s.send_broken) return;
  tcp_info info{};
  socklen_t length = sizeof info;
  if (::getsockopt(s.fd.get(), IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return;  // the read side reports
  if (info.tcpi_unacked == 0) return;
  // The last ACK may be old because the connection was idle before this data went out: count
  // the silence from the last write at the earliest.
  const int64_t since_write_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_write_checked).count();
  const int64_t silence_ms = std::min<int64_t>(info.tcpi_last_ack_recv, since_write_ms);
  if (silence_ms <= unacked_timeout_ms_) return;
  const Peer& p = peers_[s.peer];
  COLLX_TRACE(NET, "rank %d: socket %d to rank %d: %u segments unacknowledged, last ACK %u ms ago, %u retransmits",
              rank_, s.index, p.rank, info.tcpi_unacked, info.tcpi_last_ack_recv, info.tcpi_retransmits);
  poison_locked(unreachable_status(p, string_printf("no ACK for %lld ms with %u segments unacknowledged (socket %d, "
                                                   "COLLX_TCP_UNACKED_TIMEOUT_MS=%d)",
                                                   static_cast<long long>(silence_ms), info.tcpi_unacked, s.index,
                                                   unacked_timeout_ms_)),
                false);
}

}  // namespace tcp
}  // namespace collx
