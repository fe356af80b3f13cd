// The UCX engine's data path: sending (header + data), header arrival in msg-id order,
// matching, the UCX completion callbacks and the driver round. Every function here runs
// with the engine's mutex held; callbacks only record (they may fire inside any UCX call,
// so they never call back into UCX except to free). Failures: ucx_failure.cc.
#ifdef COLLX_HAVE_UCX
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "lib/common/log.h"
#include "transports/transport_checks.h"
#include "transports/ucx/ucx_engine.h"

namespace collx {
namespace ucx {

namespace {
// Headers of one peer that overtook an earlier one, held before it is a protocol error.
constexpr size_t kMaxEarlyHeaders = 4096;

void send_cb(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<SendOp*>(user_data);
  if (op->engine) {
    op->engine->run_callback([&] { op->engine->on_send_done(op, request, status); });
  } else {
    ucp_request_free(request);
  }
}

void header_cb(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto* slot = static_cast<HeaderSlot*>(user_data);
  if (slot->engine) {
    slot->engine->run_callback([&] { slot->engine->on_header(slot, request, status, info); });
  } else {
    ucp_request_free(request);
  }
}

void data_cb(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto* m = static_cast<InMsg*>(user_data);
  if (m->engine) {
    m->engine->run_callback([&] { m->engine->on_data(m, request, status, info); });
  } else {
    ucp_request_free(request);
  }
}

ucp_request_param_t send_param(SendOp* op) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = send_cb;
  param.user_data = op;
  return param;
}
}  // namespace

// ---- sending

Status UcxEngine::send_message(Peer& p, MsgType type, Request* req, uint64_t tag, const void* buf, size_t bytes,
                               const OpDesc& desc, collx_status_t code) {
  if (p.ep == nullptr || p.ep_failed) {
    return make_status(COLLX_ERR_REMOTE, "rank %d: no connection to rank %d (%s)", rank_, p.rank,
                       p.failure.empty() ? "closed" : p.failure.c_str());
  }
  auto* op = new SendOp;
  op->engine = this;
  op->req = req;
  op->peer = p.rank;
  op->pending = 1;  // guard: released at the end of this function
  WireHeader h = make_header(type, rank_, p.next_send_id++);
  h.tag = tag;
  h.bytes = bytes;
  h.desc = desc;
  h.code = code;
  const bool inline_payload = type != MsgType::kData || is_inline(bytes);
  h.inline_bytes = inline_payload ? static_cast<uint32_t>(bytes) : 0;
  op->header.resize(sizeof h + h.inline_bytes);
  std::memcpy(op->header.data(), &h, sizeof h);
  if (h.inline_bytes > 0) std::memcpy(op->header.data() + sizeof h, buf, h.inline_bytes);
  sends_.insert(op);
  if (req) req->transport_private = op;

  ucp_request_param_t param = send_param(op);
  ucs_status_ptr_t r = ucp_tag_send_nbx(p.ep, op->header.data(), op->header.size(), header_ucx_tag(rank_), &param);
  Status status;
  if (UCS_PTR_IS_ERR(r)) {
    status = make_status(COLLX_ERR_REMOTE, "rank %d: sending to rank %d failed (UCX: %s)", rank_, p.rank,
                         ucs_status_string(UCS_PTR_STATUS(r)));
  } else {
    if (r != nullptr) ++op->pending;
    if (!inline_payload) {
      op->data_req = kPosting;
      ++op->pending;  // counted before the call: its callback may fire inside it
      r = ucp_tag_send_nbx(p.ep, buf, bytes, data_ucx_tag(rank_, h.msg_id), &param);
      if (UCS_PTR_IS_ERR(r) || r == nullptr) {
        --op->pending;
        op->data_req = nullptr;
        if (UCS_PTR_IS_ERR(r)) {
          // The header is out: the peer expects data that will never come.
          status = make_status(COLLX_ERR_REMOTE, "rank %d: sending %zu bytes to rank %d failed (UCX: %s)", rank_,
                               bytes, p.rank, ucs_status_string(UCS_PTR_STATUS(r)));
          poison_locked(status, true, false);
        }
      } else if (op->data_req == kPosting) {
        op->data_req = r;
      }
    }
  }
  if (!status.ok()) {
    op->req = nullptr;  // the caller gets the status instead; leave the request untouched
    if (req && !req->done()) req->complete_error(status);
  }
  --op->pending;
  if (op->pending == 0) finish_send(op);
  return status;
}

void UcxEngine::on_send_done(SendOp* op, void* request, ucs_status_t status) {
  ucp_request_free(request);
  if (request == op->data_req) op->data_req = nullptr;
  if (status != UCS_OK && op->failure.ok()) {
    op->failure = status == UCS_ERR_CANCELED && !poison_.ok()
                      ? poison_
                      : make_status(COLLX_ERR_REMOTE,
                                    "rank %d: lost connection to rank %d while sending (UCX: %s); rank %d died or "
                                    "aborted", rank_, op->peer, ucs_status_string(status), op->peer);
  }
  if (--op->pending == 0) finish_send(op);
}

void UcxEngine::finish_send(SendOp* op) {
  if (op->req) {
    op->req->transport_private = nullptr;
    complete_request(op->req, op->failure);
  }
  sends_.erase(op);
  delete op;
}

void UcxEngine::complete_request(Request* r, Status status) {
  if (!r->done()) matcher_.complete(r, status);
}

// ---- receiving headers

Status UcxEngine::post_header_slot(HeaderSlot* slot) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv = header_cb;
  param.user_data = slot;
  // Always through the callback (which may run inside the call: see kPosting).
  param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  slot->req = kPosting;
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, slot->buf.data(), slot->buf.size(), kHeaderKind, kKindMask, &param);
  if (UCS_PTR_IS_ERR(r)) {
    slot->req = nullptr;
    return make_status(COLLX_ERR_SYSTEM, "rank %d: cannot post a UCX receive (%s)", rank_,
                       ucs_status_string(UCS_PTR_STATUS(r)));
  }
  if (slot->req == kPosting) slot->req = r;
  return Status::Ok();
}

void UcxEngine::take_header(HeaderSlot* slot, const ucp_tag_recv_info_t& info) {
  Arrival a;
  a.ucx_tag = info.sender_tag;
  a.bytes.assign(slot->buf.data(), slot->buf.data() + std::min(info.length, slot->buf.size()));
  arrivals_.push_back(std::move(a));
}

void UcxEngine::repost_header_slots() {
  if (!poison_.ok() || closed_) return;
  for (auto& slot : slots_) {
    if (slot->req != nullptr) continue;
    Status status = post_header_slot(slot.get());
    if (!status.ok()) {
      poison_locked(status, true);
      return;
    }
  }
}

void UcxEngine::on_header(HeaderSlot* slot, void* request, ucs_status_t status, const ucp_tag_recv_info_t* info) {
  // `info` lives in the request: read it before freeing the request.
  struct Free {
    void* r;
    ~Free() { ucp_request_free(r); }
  } free_request{request};
  slot->req = nullptr;
  if (status == UCS_ERR_CANCELED) return;
  if (status != UCS_OK) {
    defer_poison(make_status(COLLX_ERR_PROTOCOL, "rank %d: receiving a header failed (UCX: %s)", rank_,
                             ucs_status_string(status)),
                 true);
    return;
  }
  take_header(slot, *info);
}

void UcxEngine::defer_poison(Status status, bool notify_peers) {
  if (!deferred_poison_.ok()) return;
  deferred_poison_ = std::move(status);
  deferred_notify_ = notify_peers;
}

bool UcxEngine::process_arrivals() {
  bool any = false;
  while (!arrivals_.empty() && poison_.ok()) {
    Arrival a = std::move(arrivals_.front());
    arrivals_.pop_front();
    any = true;
    WireHeader h;
    std::memcpy(&h, a.bytes.data(), std::min(sizeof h, a.bytes.size()));
    Status status = validate_header(h, a.bytes.size(), a.ucx_tag, size_);
    if (!status.ok()) {
      poison_locked(status, true);
      break;
    }
    Peer& p = *peers_[h.src];
    if (h.msg_id < p.next_recv_id || p.early.count(h.msg_id) || p.early.size() >= kMaxEarlyHeaders) {
      poison_locked(make_status(COLLX_ERR_PROTOCOL, "rank %d: rank %d sent message id %" PRIu64 " out of order", rank_,
                                p.rank, h.msg_id),
                    true);
      break;
    }
    p.early.emplace(h.msg_id, std::move(a));
    for (auto it = p.early.begin(); it != p.early.end() && it->first == p.next_recv_id && poison_.ok();
         it = p.early.begin()) {
      Arrival next = std::move(it->second);
      p.early.erase(it);
      ++p.next_recv_id;
      handle_header(p, next);
    }
  }
  return any;
}

void UcxEngine::handle_header(Peer& p, Arrival& a) {
  WireHeader h;
  std::memcpy(&h, a.bytes.data(), sizeof h);
  const uint8_t* payload = a.bytes.data() + sizeof h;
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::kData:
      handle_data_header(p, h, payload);
      return;
    case MsgType::kPoison: {
      const collx_status_t code = status_code_from_peer(h.code);
      poison_locked(make_status(COLLX_ERR_REMOTE, "rank %d failed: %s: %s", p.rank, status_name(code),
                                printable_text(payload, h.inline_bytes).c_str())
                        .with_remote_code(code),
                    false);
      return;
    }
    case MsgType::kGoodbye:
      peer_departed(p);
      return;
  }
}

void UcxEngine::handle_data_header(Peer& p, const WireHeader& h, const uint8_t* payload) {
  // An inline payload is staged while unexpected (no budget: UCX has no way to push back).
  const bool inline_payload = is_inline(h.bytes);
  transport::Matcher::Arrival how;
  InMsg* m = matcher_.arrive<InMsg>(p.rank, h.msg_id, h.tag, h.bytes, h.desc, inline_payload, true, &how);
  if (m == nullptr) return;  // poisoned
  m->engine = this;
  if (!inline_payload) {
    m->fetchable = true;  // its DATA message waits in UCX, also after the sender left
    if (m->recv != nullptr) start_data(p, m);  // else it waits for its receive (matcher_took_unexpected)
    return;
  }
  uint8_t* dst = m->target();
  if (dst != nullptr && h.inline_bytes > 0) std::memcpy(dst, payload, h.inline_bytes);
  m->received = h.bytes;
  matcher_.message_complete(m);
}

void UcxEngine::matcher_took_unexpected(transport::InMessage* m) { start_data(*peers_[m->peer], static_cast<InMsg*>(m)); }

void UcxEngine::matcher_poison(const Status& status, bool notify_peers) { poison_locked(status, notify_peers); }

// A receive matched large message `m` (checks passed): post the UCX receive of its DATA
// message straight into the user's buffer. From here the engine owns `m` (receiving_).
void UcxEngine::start_data(Peer& p, InMsg* m) {
  Request* recv = m->recv;
  InMsg* raw = static_cast<InMsg*>(matcher_.release(m).release());
  receiving_.insert(raw);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv = data_cb;
  param.user_data = raw;
  param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;  // always through the callback
  raw->data_req = kPosting;
  // Its callback may run inside the call and free `raw`: finish_data tells us so.
  posting_ = raw;
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, recv->buffer, raw->bytes, data_ucx_tag(p.rank, raw->msg_id),
                                        ~uint64_t{0}, &param);
  const bool finished = posting_ == nullptr;
  posting_ = nullptr;
  if (finished) return;
  if (UCS_PTR_IS_ERR(r)) {
    raw->data_req = nullptr;
    Status status = make_status(COLLX_ERR_SYSTEM, "rank %d: cannot post the UCX receive of %" PRIu64
                                " bytes from rank %d (%s)", rank_, raw->bytes, p.rank,
                                ucs_status_string(UCS_PTR_STATUS(r)));
    receiving_.erase(raw);
    delete raw;
    recv->transport_private = nullptr;
    complete_request(recv, status);
    poison_locked(status, true);
    return;
  }
  if (raw->data_req == kPosting) raw->data_req = r;
}

void UcxEngine::on_data(InMsg* m, void* request, ucs_status_t status, const ucp_tag_recv_info_t* info) {
  const size_t length = status == UCS_OK ? info->length : 0;  // `info` lives in the request
  ucp_request_free(request);
  m->data_req = nullptr;
  finish_data(m, status, length);
}

void UcxEngine::finish_data(InMsg* m, ucs_status_t status, size_t length) {
  if (m == posting_) posting_ = nullptr;
  receiving_.erase(m);
  if (Request* recv = m->recv) {
    recv->transport_private = nullptr;
    if (status == UCS_OK && length == m->bytes) {
      complete_request(recv, Status::Ok());
    } else if (status == UCS_ERR_CANCELED && !poison_.ok()) {
      complete_request(recv, poison_);
    } else {
      Status failure = make_status(COLLX_ERR_REMOTE, "rank %d: receiving %" PRIu64 " bytes from rank %d failed (UCX: %s)",
                                   rank_, m->bytes, m->peer,
                                   status == UCS_OK ? "wrong length" : ucs_status_string(status));
      complete_request(recv, failure);
      defer_poison(failure, true);
    }
  }
  delete m;
}

// ---- one driver round

bool UcxEngine::progress() {
  bool moved = false;
  for (int i = 0; i < 64 && ucp_worker_progress(worker_) != 0; ++i) moved = true;
  if (!deferred_poison_.ok()) {
    Status deferred = std::move(deferred_poison_);
    deferred_poison_ = Status::Ok();
    poison_locked(deferred, deferred_notify_);
  }
  if (process_arrivals()) moved = true;
  repost_header_slots();
  check_peers(false);
  return moved;
}

}  // namespace ucx
}  // namespace collx
#endif  // COLLX_HAVE_UCX
