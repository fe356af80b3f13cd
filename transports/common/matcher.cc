// The shared message matcher (see matcher.h for the contract).
#include "transports/common/matcher.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "lib/common/log.h"
#include "transports/transport_checks.h"

namespace collx {
namespace transport {

Matcher::Matcher(int rank, int size, size_t unexpected_max_bytes, DescribeFn describe, MatchHooks& hooks)
    : rank_(rank), unexpected_max_bytes_(unexpected_max_bytes), describe_(std::move(describe)), hooks_(hooks),
      peers_(static_cast<size_t>(size)) {}

Status Matcher::check_match(int peer, uint64_t tag, uint64_t sent_bytes, const OpDesc& sent, size_t recv_bytes,
                            const OpDesc& recv) const {
  return check_message_matches(describe_, rank_, peer, tag, sent_bytes, sent, recv_bytes, recv);
}

Status Matcher::check_active(int peer, uint64_t tag, const OpDesc& desc) const {
  return check_against_active(describe_, rank_, active(), peer, tag, desc);
}

// ---- receives

Status Matcher::post_recv(Request* req, int peer, uint64_t tag, void* buf, size_t bytes, const OpDesc& desc,
                          bool departed) {
  PeerQueues& q = peers_[peer];
  // The oldest buffered message with this (peer, tag) is this receive's.
  auto unexpected = q.unexpected.find(tag);
  if (unexpected != q.unexpected.end()) {
    InMessage* m = unexpected->second.front();
    Status status = check_match(peer, tag, m->bytes, m->desc, bytes, desc);
    if (!status.ok()) {
      hooks_.matcher_poison(status, true);
      return status;
    }
    unexpected->second.pop_front();
    if (unexpected->second.empty()) q.unexpected.erase(unexpected);
    fill_posted_request(req, false, peer, tag, buf, bytes, desc);
    m->recv = req;
    req->transport_private = m;
    if (m->complete) {
      deliver(q, m);
    } else {
      hooks_.matcher_took_unexpected(m);
    }
    return Status::Ok();
  }
  if (departed) return make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", peer);
  fill_posted_request(req, false, peer, tag, buf, bytes, desc);
  q.posted[tag].push_back(req);
  // An announcement waiting for budget may be this receive's message.
  if (q.paused) hooks_.matcher_resume(peer);
  return Status::Ok();
}

Status Matcher::send_to_self(Request* send, int self, uint64_t tag, const void* buf, size_t bytes,
                             const OpDesc& desc) {
  COLLX_RETURN_IF_ERROR(buffer_self(self, tag, buf, bytes, desc));
  fill_posted_request(send, true, self, tag, buf, bytes, desc);
  send->complete_ok();
  return Status::Ok();
}

Status Matcher::buffer_self(int self, uint64_t tag, const void* buf, size_t bytes, const OpDesc& desc) {
  PeerQueues& q = peers_[self];
  auto posted = q.posted.find(tag);
  if (posted != q.posted.end()) {
    Request* recv = posted->second.front();
    Status status = check_match(self, tag, bytes, desc, recv->bytes, recv->desc);
    if (!status.ok()) {
      hooks_.matcher_poison(status, true);
      return status;
    }
    posted->second.pop_front();
    if (posted->second.empty()) q.posted.erase(posted);
    if (bytes > 0) std::memcpy(recv->buffer, buf, bytes);
    complete_ok(recv);
    return Status::Ok();
  }
  auto owned = std::make_unique<InMessage>();
  owned->announced(self, q.next_self_id++, tag, bytes, desc);
  InMessage* m = add(std::move(owned), nullptr, true);
  if (m == nullptr) return poison_;
  if (bytes > 0) std::memcpy(m->staging.get(), buf, bytes);
  m->received = bytes;
  m->complete = true;
  return Status::Ok();
}

void Matcher::cancel_recv(Request* r, const Status& cancelled) {
  auto* m = static_cast<InMessage*>(r->transport_private);
  if (m == nullptr) {
    forget_posted(peers_[r->peer].posted, r);
  } else {
    // Partly received: the transport consumes and drops the rest of its payload, keeping its
    // stream in step, and nothing more is written to this buffer.
    m->recv = nullptr;
    m->discard = true;
    release_staging(m);
  }
  complete(r, cancelled);
}

// ---- arrivals

Matcher::Arrival Matcher::announce(int peer, uint64_t tag, uint64_t bytes, const OpDesc& desc, bool staged,
                                   bool ignore_budget, Request** recv) {
  *recv = nullptr;
  Status status = check_active(peer, tag, desc);
  if (!status.ok()) {
    hooks_.matcher_poison(status, true);
    return Arrival::kFailed;
  }
  PeerQueues& q = peers_[peer];
  auto posted = q.posted.find(tag);
  if (posted != q.posted.end()) {
    Request* r = posted->second.front();
    status = check_match(peer, tag, bytes, desc, r->bytes, r->desc);
    if (!status.ok()) {
      hooks_.matcher_poison(status, true);
      return Arrival::kFailed;
    }
    posted->second.pop_front();
    if (posted->second.empty()) q.posted.erase(posted);
    set_paused(peer, false);
    *recv = r;
    return Arrival::kMatched;
  }
  if (staged && bytes > 0 && !ignore_budget && unexpected_bytes_ + bytes > unexpected_max_bytes_) {
    // Never drop: the transport leaves it where it is (its sender stalls) until a receive is
    // posted or buffered messages are consumed.
    if (!q.paused) {
      COLLX_TRACE(NET, "rank %d: unexpected-message budget full (%" PRIu64 " of %zu bytes): pausing rank %d", rank_,
                  unexpected_bytes_, unexpected_max_bytes_, peer);
    }
    q.paused_tag = tag;
    q.paused_desc = desc;
    set_paused(peer, true);
    return Arrival::kPaused;
  }
  set_paused(peer, false);
  return Arrival::kUnexpected;
}

InMessage* Matcher::add(std::unique_ptr<InMessage> m, Request* recv, bool staged) {
  m->recv = recv;
  if (recv == nullptr && staged && m->bytes > 0) {
    m->staging.reset(static_cast<uint8_t*>(std::malloc(m->bytes)));
    if (!m->staging) {
      hooks_.matcher_poison(make_status(COLLX_ERR_NO_MEMORY,
                                        "rank %d: cannot buffer an unexpected message of %" PRIu64 " bytes from rank %d",
                                        rank_, m->bytes, m->peer),
                            true);
      return nullptr;
    }
  }
  InMessage* raw = m.get();
  PeerQueues& q = peers_[raw->peer];
  // Into the table first: if that allocation throws, nothing refers to the message yet.
  q.live[raw->msg_id] = std::move(m);
  if (raw->staging) unexpected_bytes_ += raw->bytes;
  if (recv != nullptr) {
    recv->transport_private = raw;
  } else {
    q.unexpected[raw->tag].push_back(raw);
  }
  return raw;
}

InMessage* Matcher::find(int peer, uint64_t msg_id) const {
  const auto& live = peers_[peer].live;
  auto it = live.find(msg_id);
  return it == live.end() ? nullptr : it->second.get();
}

void Matcher::message_complete(InMessage* m) {
  m->complete = true;
  PeerQueues& q = peers_[m->peer];
  if (m->discard) {
    release_staging(m);
    q.live.erase(m->msg_id);  // destroys m
    return;
  }
  if (m->recv == nullptr) return;  // unexpected: waits in the queue for its receive
  deliver(q, m);
}

void Matcher::deliver(PeerQueues& q, InMessage* m) {
  Request* recv = m->recv;
  if (m->staging) {
    if (m->bytes > 0) std::memcpy(recv->buffer, m->staging.get(), m->bytes);
    release_staging(m);
  }
  q.live.erase(m->msg_id);  // destroys m
  complete_ok(recv);
}

void Matcher::forget(InMessage* m) {
  release_staging(m);
  peers_[m->peer].live.erase(m->msg_id);
}

std::unique_ptr<InMessage> Matcher::release(InMessage* m) {
  auto& live = peers_[m->peer].live;
  auto it = live.find(m->msg_id);
  std::unique_ptr<InMessage> owned = std::move(it->second);
  live.erase(it);
  return owned;
}

void Matcher::release_staging(InMessage* m) {
  if (!m->staging) return;
  m->staging.reset();
  unexpected_bytes_ -= m->bytes;
  if (paused_count_ > 0) resume_paused();
}

void Matcher::set_paused(int peer, bool paused) {
  PeerQueues& q = peers_[peer];
  if (q.paused == paused) return;
  q.paused = paused;
  paused_count_ += paused ? 1 : -1;
}

void Matcher::resume_paused() {
  for (size_t peer = 0; peer < peers_.size(); ++peer) {
    if (peers_[peer].paused) hooks_.matcher_resume(static_cast<int>(peer));
  }
}

// ---- the collective running now, failures

void Matcher::set_active(const OpDesc* desc, bool check) {
  if (desc == nullptr) {
    active_.reset();
    return;
  }
  active_ = *desc;
  if (!check || !poison_.ok()) return;
  // Messages that arrived before this collective started are checked now.
  for (size_t peer = 0; peer < peers_.size(); ++peer) {
    const PeerQueues& q = peers_[peer];
    for (const auto& [tag, queue] : q.unexpected) {
      for (const InMessage* m : queue) {
        Status status = check_active(static_cast<int>(peer), m->tag, m->desc);
        if (!status.ok()) {
          hooks_.matcher_poison(status, true);
          return;
        }
      }
    }
    if (q.paused) {  // the announcement the transport left where it was
      Status status = check_active(static_cast<int>(peer), q.paused_tag, q.paused_desc);
      if (!status.ok()) {
        hooks_.matcher_poison(status, true);
        return;
      }
    }
  }
}

bool Matcher::begin_poison(const Status& status) {
  if (!poison_.ok()) return false;
  poison_ = status.ok() ? make_status(COLLX_ERR_INTERNAL, "transport poisoned with an OK status") : status;
  for (size_t peer = 0; peer < peers_.size(); ++peer) fail_peer(static_cast<int>(peer), poison_);
  return true;
}

void Matcher::fail_peer(int peer, const Status& status) {
  PeerQueues& q = peers_[peer];
  for (auto& [tag, queue] : q.posted) {
    for (Request* req : queue) complete(req, status);
  }
  q.posted.clear();
  for (auto& [id, m] : q.live) {
    if (m->complete || m->fetchable) continue;
    if (m->recv != nullptr) complete(m->recv, status);
    m->recv = nullptr;
    m->discard = true;  // nothing may be written into anyone's memory any more
    release_staging(m.get());
  }
  // Unfinished messages can never be delivered: forget them (complete ones stay receivable).
  for (auto it = q.unexpected.begin(); it != q.unexpected.end();) {
    auto& queue = it->second;
    queue.erase(std::remove_if(queue.begin(), queue.end(),
                               [](const InMessage* m) { return !m->complete && !m->fetchable; }),
                queue.end());
    it = queue.empty() ? q.unexpected.erase(it) : std::next(it);
  }
  for (auto it = q.live.begin(); it != q.live.end();) {
    it = it->second->complete || it->second->fetchable ? std::next(it) : q.live.erase(it);
  }
  set_paused(peer, false);
}

}  // namespace transport
}  // namespace collx
