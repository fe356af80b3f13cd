// The TCP store server's output side: queueing replies, sending what each socket accepts,
// epoll interest, and the ways a connection ends (protocol violation, refusal, error, close).
// tcp_store_server_impl.h has the class.
#include <sys/epoll.h>

#include <algorithm>
#include <cstring>

#include "lib/common/log.h"
#include "lib/store/tcp_store_server_impl.h"

namespace collx {
namespace tcp_store_server {

void TcpStoreServerImpl::send_reply(Connection* c, const Reply& reply) {
  encode_reply(reply, &c->output);
  // Sent by flush() from service(): several replies of one read go out in one send.
}

// Sends what the socket accepts. False when the connection was closed.
bool TcpStoreServerImpl::flush(Connection* c) {
  while (c->queued() > 0) {
    ssize_t n = send_some(c->fd.get(), c->output.data() + c->output_start, c->queued());
    if (n == 0) break;
    if (n < 0) {
      COLLX_TRACE(STORE, "store server: client %s: %s", c->peer.c_str(), std::strerror(errno));
      close_connection(c);
      return false;
    }
    c->output_start += static_cast<size_t>(n);
  }
  if (c->queued() == 0) {
    c->output.clear();
    c->output_start = 0;
    if (c->closing) {
      close_connection(c);
      return false;
    }
  }
  return true;
}

void TcpStoreServerImpl::update_interest(Connection* c) {
  uint32_t wanted = EPOLLRDHUP | (c->wants_read() ? EPOLLIN : 0u) | (c->queued() > 0 ? EPOLLOUT : 0u);
  if (wanted == c->registered_events) return;
  epoll_event ev{};
  ev.events = wanted;
  ev.data.u64 = c->id;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c->fd.get(), &ev) == 0) c->registered_events = wanted;
}

// Drops the connection. A peer that spoke our magic is a collx client of some kind (perhaps
// another version): it gets an error reply saying why before the close.
void TcpStoreServerImpl::protocol_violation(Connection* c, const Status& status) {
  COLLX_WARN(STORE, "store server: dropping client %s: %s", c->peer.c_str(), status.message().c_str());
  Header header;
  const uint8_t* frame = c->input.data() + c->input_start;
  decode_header(frame, c->unparsed(), false, &header).ignore();
  if (header.magic != kMagic) {
    close_connection(c);
    return;
  }
  Reply reply;
  const uint16_t base = static_cast<uint16_t>(header.opcode & ~kReplyFlag);
  reply.opcode = base >= 1 && base <= static_cast<uint16_t>(Opcode::kAuth) ? static_cast<Opcode>(base) : Opcode::kHello;
  reply.request_id = header.request_id;
  close_after_error(c, reply, status);
}

// Refuses a well-formed request (job token): the warning names the client and the reason,
// the client gets the reason as an error reply, then the connection closes. Nothing else it
// sent is processed.
void TcpStoreServerImpl::refuse(Connection* c, Reply reply, const Status& why) {
  COLLX_WARN(STORE, "store server: dropping client %s: %s", c->peer.c_str(), why.message().c_str());
  close_after_error(c, reply, why);
}

void TcpStoreServerImpl::close_after_error(Connection* c, Reply reply, const Status& why) {
  reply.status = why.ok() ? COLLX_ERR_PROTOCOL : why.code();
  reply.message = "store server dropped the connection: " + why.message();
  reply.challenge.clear();
  reply.mac.clear();
  send_reply(c, reply);
  c->closing = true;
  c->input.clear();
  c->input_start = 0;
  if (flush(c)) update_interest(c);
}

void TcpStoreServerImpl::close_connection(Connection* c) {
  drop_waiter(c);
  if (!c->handshake.authenticated()) handshaking_.fetch_sub(1);
  // Closing the descriptor removes it from the epoll set.
  connections_.erase(c->id);
}

}  // namespace tcp_store_server
}  // namespace collx
