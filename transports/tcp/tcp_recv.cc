// The receive side of the TCP engine: reading frames from a socket, announcing and matching
// messages, buffering unexpected ones within the budget, and pausing a socket when it must
// wait (for an announcement on socket 0, or for budget).
#include <errno.h>
#include <sys/socket.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "lib/common/log.h"
#include "transports/transport_checks.h"
#include "transports/tcp/tcp_engine.h"

namespace collx {
namespace tcp {

namespace {

// Payload remainders at least this large are received straight into their destination;
// smaller ones go through the socket's buffer so one recv() also picks up the next frames.
constexpr size_t kDirectReadMin = 16 << 10;
// Bytes read from one socket per turn, so one busy peer cannot starve the others.
constexpr size_t kReadQuota = 8 << 20;


}  // namespace

// Reads and processes frames until the socket has nothing more now, pauses, ends or the
// transport fails. Leaves the epoll registration matching the socket's new state.
void TcpEngine::read_socket(Socket& s) {
  size_t quota = kReadQuota;
  uint64_t seen = completions_;
  while (poison_.ok() && !aborted_.load(std::memory_order_relaxed)) {
    if (s.rx == RxState::kClosed) break;
    if (completions_ != seen) {
      seen = completions_;
      if (driver_satisfied()) {
        schedule_read(s);  // the rest is read in the next round, after the caller posted more
        break;
      }
    }
    if (s.rx == RxState::kWaitAnnounce || s.rx == RxState::kWaitBudget) {
      if (!handle_data_header(s)) break;  // still paused (or failed)
      continue;
    }
    const size_t buffered = s.rlen - s.rpos;
    if (s.rx == RxState::kHeader) {
      if (buffered >= kFrameHeaderBytes) {
        if (!parse_header(s)) break;
        continue;
      }
    } else {  // kPayload
      if (s.left == 0) {
        finish_frame(s);
        continue;
      }
      if (buffered > 0) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(buffered, s.left));
        uint8_t* dst = payload_target(s);
        if (dst != nullptr) std::memcpy(dst, s.rbuf.get() + s.rpos, n);
        s.rpos += n;
        receive_payload_bytes(s, n);
        continue;
      }
    }
    // Nothing usable is buffered: read from the kernel.
    if (quota == 0) {
      schedule_read(s);  // more may be waiting; let the other sockets have a turn first
      break;
    }
    if (s.maybe_drained) break;  // the last recv() emptied the socket; epoll reports more
    uint8_t* dst = s.rx == RxState::kPayload ? payload_target(s) : nullptr;
    ssize_t n;
    if (dst != nullptr && s.left >= kDirectReadMin) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(s.left, quota));
      do {
        n = ::recv(s.fd.get(), dst, want, 0);
      } while (n < 0 && errno == EINTR);
      if (n > 0) {
        s.maybe_drained = static_cast<size_t>(n) < want;
        receive_payload_bytes(s, static_cast<size_t>(n));
      }
    } else {
      n = fill_rbuf(s);
    }
    if (n > 0) {
      quota -= std::min(quota, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      on_stream_end(s, 0);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      s.maybe_drained = true;
    } else {
      on_stream_end(s, errno);
    }
    break;
  }
  update_epoll(s);
}

// Appends what the kernel has to the socket buffer (after moving unparsed bytes to the
// front). Returns recv()'s result; errno is set when negative.
ssize_t TcpEngine::fill_rbuf(Socket& s) {
  if (s.rpos > 0) {
    size_t rest = s.rlen - s.rpos;
    if (rest > 0) std::memmove(s.rbuf.get(), s.rbuf.get() + s.rpos, rest);
    s.rlen = rest;
    s.rpos = 0;
  }
  size_t space = kRxBufferBytes - s.rlen;
  ssize_t n;
  do {
    n = ::recv(s.fd.get(), s.rbuf.get() + s.rlen, space, 0);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    s.rlen += static_cast<size_t>(n);
    s.maybe_drained = static_cast<size_t>(n) < space;
  }
  return n;
}

uint8_t* TcpEngine::payload_target(Socket& s) {
  if (s.hdr.type == FrameType::kPoison) return reinterpret_cast<uint8_t*>(&s.text[0]) + s.pos;
  uint8_t* base = s.msg != nullptr ? s.msg->target() : nullptr;
  return base != nullptr ? base + s.pos : nullptr;
}

void TcpEngine::receive_payload_bytes(Socket& s, size_t n) {
  s.pos += n;
  s.left -= n;
  if (s.msg != nullptr) s.msg->received += n;
  if (s.left == 0) finish_frame(s);
}

// Decodes the header at rbuf[rpos]. False when reading must stop (failure or pause).
bool TcpEngine::parse_header(Socket& s) {
  Peer& p = peers_[s.peer];
  FrameHeader h;
  std::string why;
  if (!decode_frame_header(s.rbuf.get() + s.rpos, p.rank, &h, &why)) {
    protocol_error(s, why);
    return false;
  }
  s.rpos += kFrameHeaderBytes;
  if (s.goodbye_received) {
    protocol_error(s, "frame after GOODBYE");
    return false;
  }
  s.hdr = h;
  switch (h.type) {
    case FrameType::kGoodbye:
      s.goodbye_received = true;
      if (++p.goodbyes == nsocks_) peer_departed(p);
      return true;
    case FrameType::kPoison:
      s.text.assign(h.frag_bytes, '\0');
      s.msg = nullptr;
      s.pos = 0;
      s.left = h.frag_bytes;
      s.rx = RxState::kPayload;
      return true;
    case FrameType::kData:
      return handle_data_header(s);
  }
  return false;
}

// Handles the DATA header in s.hdr: an announcement (offset 0, socket 0) or a further
// fragment of an announced message. Also re-runs a paused header. False when paused or failed.
bool TcpEngine::handle_data_header(Socket& s) {
  Peer& p = peers_[s.peer];
  const FrameHeader& h = s.hdr;
  if (h.frag_offset == 0) {
    if (s.index != 0) {
      protocol_error(s, "first fragment of a message on a socket other than socket 0");
      return false;
    }
    return announce(s);
  }
  if (h.frag_bytes == 0) {
    protocol_error(s, "empty fragment");
    return false;
  }
  if (h.msg_id > p.last_announced) {
    if (s.index == 0) {
      protocol_error(s, string_printf("fragment of message %" PRIu64 " before its first fragment", h.msg_id));
      return false;
    }
    // Socket 0 has not announced the message yet: stop reading here until it does.
    s.rx = RxState::kWaitAnnounce;
    return false;
  }
  auto* m = static_cast<InMsg*>(matcher_.find(p.rank, h.msg_id));
  if (m == nullptr || m->complete) {
    protocol_error(s, string_printf("fragment of message %" PRIu64 ", which is not in progress", h.msg_id));
    return false;
  }
  if (m->tag != h.tag || m->bytes != h.msg_bytes || m->desc != h.desc) {
    protocol_error(s, string_printf("fragment of message %" PRIu64 " disagrees with its first fragment", h.msg_id));
    return false;
  }
  if (h.frag_bytes > m->bytes - m->claimed) {
    protocol_error(s, string_printf("fragments of message %" PRIu64 " exceed its %" PRIu64 " bytes", h.msg_id, m->bytes));
    return false;
  }
  m->claimed += h.frag_bytes;
  s.msg = m;
  s.pos = h.frag_offset;
  s.left = h.frag_bytes;
  s.rx = RxState::kPayload;
  return true;
}

bool TcpEngine::announce(Socket& s) {
  Peer& p = peers_[s.peer];
  const FrameHeader& h = s.hdr;
  if (h.msg_id <= p.last_announced) {
    protocol_error(s, string_printf("message id %" PRIu64 " after %" PRIu64, h.msg_id, p.last_announced));
    return false;
  }
  if ((h.frag_bytes == 0) != (h.msg_bytes == 0)) {
    protocol_error(s, "empty first fragment of a non-empty message");
    return false;
  }
  transport::Matcher::Arrival how;
  InMsg* m = matcher_.arrive<InMsg>(p.rank, h.msg_id, h.tag, h.msg_bytes, h.desc, true, p.closing, &how);
  if (m == nullptr) {
    // Budget full: never drop; stop reading from this peer (TCP pushes back on it) until a
    // receive is posted or buffered messages are consumed (matcher_resume).
    if (how == transport::Matcher::Arrival::kPaused) s.rx = RxState::kWaitBudget;
    return false;
  }
  COLLX_TRACE(NET, "rank %d: message %" PRIu64 " from rank %d, %s, %" PRIu64 " bytes: %s", rank_, h.msg_id, p.rank,
              transport::tag_text(h.tag).c_str(), h.msg_bytes, m->recv ? "matched" : "unexpected");
  p.last_announced = h.msg_id;
  m->claimed = h.frag_bytes;
  resume_announce_waiters(p);
  if (h.msg_bytes == 0) {
    s.rx = RxState::kHeader;
    matcher_.message_complete(m);
    return true;
  }
  s.msg = m;
  s.pos = 0;
  s.left = h.frag_bytes;
  s.rx = RxState::kPayload;
  return true;
}

void TcpEngine::finish_frame(Socket& s) {
  s.rx = RxState::kHeader;
  Peer& p = peers_[s.peer];
  if (s.hdr.type == FrameType::kPoison) {
    std::string text = s.text;
    for (char& c : text) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    }
    const collx_status_t code = status_code_from_peer(static_cast<int64_t>(s.hdr.tag));
    // The failed rank told every peer itself: no need to relay.
    poison_locked(make_status(COLLX_ERR_REMOTE, "rank %d failed: %s: %s", p.rank, status_name(code), text.c_str())
                      .with_remote_code(code),
                  false);
    return;
  }
  InMsg* m = s.msg;
  s.msg = nullptr;
  if (m != nullptr && m->received == m->bytes) matcher_.message_complete(m);
}

void TcpEngine::resume_announce_waiters(Peer& p) {
  for (auto& s : p.sockets) {
    if (s->rx == RxState::kWaitAnnounce && s->hdr.msg_id <= p.last_announced) schedule_read(*s);
  }
}

// An announcement on socket 0 of `peer` waits for budget: read it again.
void TcpEngine::matcher_resume(int peer) {
  Peer& p = peers_[peer];
  if (!p.sockets.empty() && p.sockets[0]->rx == RxState::kWaitBudget) schedule_read(*p.sockets[0]);
}

void TcpEngine::matcher_poison(const Status& status, bool notify_peers) { poison_locked(status, notify_peers); }

}  // namespace tcp
}  // namespace collx
