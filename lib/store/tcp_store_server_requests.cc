// The TCP store server's requests: answering each complete request of a connection in order,
// and the waits of GET and WAIT on missing keys (parked connections, woken by the write that
// supplies the key or by their timeout). tcp_store_server_impl.h has the class.
#include <algorithm>
#include <cstring>

#include "lib/common/log.h"
#include "lib/store/tcp_store_server_impl.h"

namespace collx {
namespace tcp_store_server {

// Answers every complete request buffered, then sends and re-arms.
void TcpStoreServerImpl::service(Connection* c) {
  const uint64_t id = c->id;
  process_requests(c);
  if (find(id) == nullptr || !flush(c)) return;
  update_interest(c);
}

void TcpStoreServerImpl::process_requests(Connection* c) {
  const uint64_t id = c->id;
  while (!c->closing && !c->blocked()) {
    Request request;
    size_t frame_bytes = 0;
    // Before authenticating, the header alone decides: a frame other than the handshake is
    // refused before its body is read.
    Status status = c->handshake.screen(c->input.data() + c->input_start, c->unparsed());
    if (!status.ok()) {
      refused_handshakes_.fetch_add(1);
      protocol_violation(c, status);
      return;
    }
    status = decode_request(c->input.data() + c->input_start, c->unparsed(), &request, &frame_bytes);
    if (!status.ok()) {
      protocol_violation(c, status);
      return;
    }
    if (frame_bytes == 0) break;
    c->input_start += frame_bytes;
    handle(c, std::move(request));
    if (find(id) == nullptr) return;
  }
  // Keep the unparsed tail at the front so the buffer does not creep.
  if (c->input_start == c->input.size()) {
    c->input.clear();
    c->input_start = 0;
  } else if (c->input_start >= kReadChunkBytes) {
    c->input.erase(c->input.begin(), c->input.begin() + static_cast<std::ptrdiff_t>(c->input_start));
    c->input_start = 0;
  }
}

void TcpStoreServerImpl::handle(Connection* c, Request request) {
  if (options_.before_request) options_.before_request();
  Reply reply;
  reply.opcode = request.opcode;
  reply.request_id = request.request_id;
  const bool was_authenticated = c->handshake.authenticated();
  bool answered = false;
  Status status = c->handshake.on_request(request, &reply, &answered);
  if (!status.ok()) {
    if (!was_authenticated) refused_handshakes_.fetch_add(1);
    refuse(c, reply, status);
    return;
  }
  if (!was_authenticated && c->handshake.authenticated()) handshaking_.fetch_sub(1);
  if (answered) {
    send_reply(c, reply);
    return;
  }
  switch (request.opcode) {
    case Opcode::kHello:
    case Opcode::kAuth: break;  // answered by the handshake
    case Opcode::kPing: break;
    case Opcode::kSet:
      status = table_.set(request.key, std::move(request.value));
      if (status.ok()) key_stored(request.key);
      break;
    case Opcode::kGet:
      if (const Bytes* value = table_.find(request.key)) {
        reply.value = *value;
        break;
      }
      request.keys.assign(1, request.key);
      park(c, std::move(request), 0);
      return;
    case Opcode::kAdd:
      status = table_.add(request.key, request.delta, &reply.new_value);
      if (status.ok()) key_stored(request.key);
      break;
    case Opcode::kCompareSet: {
      bool stored = false;
      status = table_.compare_set(request.key, request.expected, request.value, &reply.value, &stored);
      if (stored) key_stored(request.key);
      break;
    }
    case Opcode::kWait:
      if (const std::string* missing = table_.first_missing(request.keys)) {
        size_t index = static_cast<size_t>(missing - request.keys.data());
        park(c, std::move(request), index);
        return;
      }
      break;
    case Opcode::kDelete: table_.remove(request.key); break;
  }
  reply.status = status.code();
  reply.message = status.message();
  send_reply(c, reply);
}

void TcpStoreServerImpl::park(Connection* c, Request request, size_t missing_index) {
  const char* operation = request.opcode == Opcode::kGet ? "get" : "wait";
  if (request.timeout_ms == 0) {
    Reply reply;
    reply.opcode = request.opcode;
    reply.request_id = request.request_id;
    Status status = store_timeout_status(operation, 0, request.keys[missing_index]);
    reply.status = status.code();
    reply.message = status.message();
    send_reply(c, reply);
    return;
  }
  c->waiting = true;
  c->parked = std::move(request);
  c->missing_index = missing_index;
  waiters_[c->parked.keys[missing_index]].push_back(c->id);
  if (c->parked.timeout_ms > 0 && c->parked.timeout_ms <= kMaxTimeoutMs) {
    c->timeout_entry = timeouts_.emplace(Clock::now() + std::chrono::milliseconds(c->parked.timeout_ms), c->id);
    c->has_timeout = true;
  }
}

// A write stored `key`: every connection parked on it moves to its next missing key or, when
// none is left, gets its answer.
void TcpStoreServerImpl::key_stored(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<uint64_t> parked = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t id : parked) {
    Connection* c = find(id);
    if (c == nullptr || !c->waiting) continue;
    const std::vector<std::string>& keys = c->parked.keys;
    size_t next = c->missing_index + 1;
    while (next < keys.size() && table_.find(keys[next]) != nullptr) ++next;
    if (next < keys.size()) {
      c->missing_index = next;
      waiters_[keys[next]].push_back(id);
    } else {
      finish_wait(c, Status::Ok());
    }
  }
}

void TcpStoreServerImpl::finish_wait(Connection* c, const Status& status) {
  drop_waiter(c);
  Reply reply;
  reply.opcode = c->parked.opcode;
  reply.request_id = c->parked.request_id;
  reply.status = status.code();
  reply.message = status.message();
  if (status.ok() && reply.opcode == Opcode::kGet) reply.value = *table_.find(c->parked.key);
  c->parked = Request();
  send_reply(c, reply);
  ready_.push_back(c->id);  // requests buffered behind the wait can proceed now
}

void TcpStoreServerImpl::expire_timeouts() {
  const Clock::time_point now = Clock::now();
  while (!timeouts_.empty() && timeouts_.begin()->first <= now) {
    Connection* c = find(timeouts_.begin()->second);
    if (c == nullptr) {  // cannot happen: closing a connection removes its entry
      timeouts_.erase(timeouts_.begin());
      continue;
    }
    // A failure here drops c, which takes its entry out of timeouts_: the loop moves on.
    guarded(c->id, [&] {
      const char* operation = c->parked.opcode == Opcode::kGet ? "get" : "wait";
      finish_wait(c, store_timeout_status(operation, c->parked.timeout_ms, c->parked.keys[c->missing_index]));
    });
  }
}

// Forgets that `c` waits: its entry under the key it waits for and its timeout.
void TcpStoreServerImpl::drop_waiter(Connection* c) {
  if (!c->waiting) return;
  auto it = waiters_.find(c->parked.keys[c->missing_index]);
  if (it != waiters_.end()) {
    auto& ids = it->second;
    ids.erase(std::remove(ids.begin(), ids.end(), c->id), ids.end());
    if (ids.empty()) waiters_.erase(it);
  }
  if (c->has_timeout) timeouts_.erase(c->timeout_entry);
  c->has_timeout = false;
  c->waiting = false;
}

}  // namespace tcp_store_server
}  // namespace collx
