// The send side of the TCP engine: per-socket FIFO queues of frames written with sendmsg()
// (header and payload as one gather list, several small frames per call), and control
// frames (POISON, GOODBYE).
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

#include "lib/common/log.h"
#include "transports/tcp/tcp_engine.h"

namespace collx {
namespace tcp {

namespace {
constexpr int kMaxIov = 64;  // two per frame: up to 32 small frames per sendmsg()
}

// Writes queued frames until the queue is empty or the kernel buffer is full; the socket
// waits for EPOLLOUT exactly while frames remain.
void TcpEngine::write_socket(Socket& s) {
  while (!s.sendq.empty() && !s.send_broken && !s.mid_frame && s.fd.valid()) {
    iovec iov[kMaxIov];
    int niov = 0;
    size_t asked = 0;
    for (OutFrame* f : s.sendq) {
      if (niov + 2 > kMaxIov) break;
      if (f->sent < kFrameHeaderBytes) {
        iov[niov++] = iovec{f->header + f->sent, kFrameHeaderBytes - f->sent};
        asked += kFrameHeaderBytes - f->sent;
      }
      size_t payload_done = f->sent > kFrameHeaderBytes ? f->sent - kFrameHeaderBytes : 0;
      if (f->data_bytes > payload_done) {
        iov[niov++] = iovec{const_cast<uint8_t*>(f->data) + payload_done, f->data_bytes - payload_done};
        asked += f->data_bytes - payload_done;
      }
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = static_cast<size_t>(niov);
    ssize_t n = ::sendmsg(s.fd.get(), &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      on_send_error(s, errno);
      return;
    }
    s.wrote_since_check = true;
    size_t left = static_cast<size_t>(n);
    while (left > 0) {
      OutFrame* f = s.sendq.front();
      size_t take = std::min(left, f->total() - f->sent);
      if (f->op != nullptr) {
        size_t before = f->sent > kFrameHeaderBytes ? f->sent - kFrameHeaderBytes : 0;
        size_t after = f->sent + take > kFrameHeaderBytes ? f->sent + take - kFrameHeaderBytes : 0;
        f->op->payload_sent += after - before;
      }
      f->sent += take;
      left -= take;
      if (f->sent == f->total()) {
        s.sendq.pop_front();
        frame_written(f);
      }
    }
    // A short write means the kernel buffer is full: asking again would only say EAGAIN.
    if (static_cast<size_t>(n) < asked) break;
  }
  update_epoll(s);
}

void TcpEngine::frame_written(OutFrame* frame) {
  SendOp* op = frame->op;
  if (op == nullptr) {
    delete frame;
    return;
  }
  if (--op->frames_left > 0) return;
  Request* req = op->req;
  delete op;
  matcher_.complete_ok(req);
}

void TcpEngine::queue_control_frame(Socket& s, FrameType type, uint64_t tag, const std::string& text) {
  auto* frame = new OutFrame;
  frame->text = text.substr(0, kMaxPoisonTextBytes);
  frame->data = reinterpret_cast<const uint8_t*>(frame->text.data());
  frame->data_bytes = frame->text.size();
  FrameHeader h;
  h.type = type;
  h.src_rank = rank_;
  h.tag = tag;
  h.frag_bytes = static_cast<uint32_t>(frame->data_bytes);
  h.msg_bytes = frame->data_bytes;
  encode_frame_header(h, frame->header);
  s.sendq.push_back(frame);
}

// Best effort, never blocking: one POISON frame per peer on a socket whose stream is at a
// frame boundary (socket 0 preferred), one non-blocking write, then every socket is shut
// down so peers see the end of the stream even when the frame did not get out.
void TcpEngine::send_poison_frames(const Status& status) {
  peers_notified_ = true;
  for (Peer& p : peers_) {
    if (p.sockets.empty() || p.departed) continue;
    for (auto& s : p.sockets) {
      if (s->mid_frame || s->send_broken || !s->sendq.empty() || !s->fd.valid()) continue;
      queue_control_frame(*s, FrameType::kPoison, static_cast<uint64_t>(static_cast<int64_t>(status.cause_code())),
                          status.message());
      write_socket(*s);
      break;
    }
  }
  for (Peer& p : peers_) {
    for (auto& s : p.sockets) {
      if (s->fd.valid()) ::shutdown(s->fd.get(), SHUT_RDWR);
    }
  }
}

}  // namespace tcp
}  // namespace collx
