// The moving parts of the shm engine: pushing cells into peers' rings, consuming our own
// rings (announcements, matching, unexpected budget, rendezvous pulls), peers' state words
// and liveness, and poison. Every function here runs with the engine mutex held.
#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "lib/common/log.h"
#include "transports/transport_checks.h"
#include "transports/shm/shm_cma.h"
#include "transports/shm/shm_engine.h"

namespace collx {
namespace shm {

namespace {

// Cells handled per ring per round, so one busy peer cannot starve the others.
constexpr int kCellsPerRound = 64;
constexpr int64_t kLivenessPeriodUs = 100 * 1000;


CellHeader make_header(CellType type, uint64_t tag, uint64_t msg_id, uint64_t msg_bytes, uint64_t offset,
                       uint32_t payload_bytes, const OpDesc& desc) {
  CellHeader h{};
  h.type = static_cast<uint32_t>(type);
  h.payload_bytes = payload_bytes;
  h.tag = tag;
  h.msg_id = msg_id;
  h.msg_bytes = msg_bytes;
  h.offset = offset;
  h.desc = desc;
  return h;
}

}  // namespace

bool ShmEngine::progress() {
  bool moved = false;
  for (auto& pp : peers_) {
    Peer& p = *pp;
    moved |= poll_board_waits(p);  // first: a collective in shared memory waits on nothing else
    if (!poison_.ok()) return true;
    if (p.rank == rank_ || p.departed) continue;
    moved |= poll_ctrl(p);
    if (!poison_.ok()) return true;
    moved |= poll_data(p);
    if (!poison_.ok()) return true;
    moved |= retry_pulls(p);
    moved |= push_sends(p);
    if (!poison_.ok()) return true;
  }
  const int64_t now = monotonic_us();
  const bool check_processes = now - last_liveness_us_ >= kLivenessPeriodUs;
  if (check_processes) last_liveness_us_ = now;
  check_peers(check_processes);
  return moved || !poison_.ok();
}

bool ShmEngine::sends_pending() const {
  for (const auto& p : peers_) {
    if (!p->departed && (!p->sendq.empty() || !p->chunk_ops.empty() || !p->awaiting.empty() || !p->ctrl_out.empty())) {
      return true;
    }
  }
  return false;
}

// ---- sending

bool ShmEngine::push_sends(Peer& p) {
  if (p.departed || !p.out_data.valid()) return false;
  bool moved = false, corrupt = false;
  // Control cells first: a sender may be waiting for them.
  while (!p.ctrl_out.empty()) {
    uint8_t* slot = p.out_ctrl.producer_slot(&corrupt);
    if (slot == nullptr) break;
    std::memcpy(slot, &p.ctrl_out.front(), sizeof(CellHeader));
    p.out_ctrl.produce();
    p.ctrl_out.pop_front();
    moved = true;
  }
  // Rendezvous messages the receiver asked us to stream through the ring.
  while (!corrupt && !p.chunk_ops.empty()) {
    SendOp* op = p.chunk_ops.front();
    const Request* r = op->req;
    bool full = false;
    while (op->pushed < r->bytes) {
      uint8_t* slot = p.out_data.producer_slot(&corrupt);
      if (slot == nullptr) {
        full = true;
        break;
      }
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(kCellPayload, r->bytes - op->pushed));
      CellHeader h = make_header(CellType::kChunk, r->tag, op->msg_id, r->bytes, op->pushed, n, r->desc);
      std::memcpy(slot, &h, sizeof h);
      std::memcpy(slot + sizeof h, static_cast<const uint8_t*>(r->buffer) + op->pushed, n);
      p.out_data.produce();
      op->pushed += n;
      moved = true;
    }
    if (full) break;
    p.chunk_ops.pop_front();
    complete_send(p, op);
  }
  // New messages, in post order (so announcements arrive in msg id order).
  while (!corrupt && !p.sendq.empty()) {
    SendOp* op = p.sendq.front();
    const Request* r = op->req;
    if (op->rndv) {
      uint8_t* slot = p.out_data.producer_slot(&corrupt);
      if (slot == nullptr) break;
      CellHeader h = make_header(CellType::kRts, r->tag, op->msg_id, r->bytes, 0, sizeof(RtsBody), r->desc);
      RtsBody body{static_cast<int64_t>(::getpid()), reinterpret_cast<uint64_t>(r->buffer)};
      std::memcpy(slot, &h, sizeof h);
      std::memcpy(slot + sizeof h, &body, sizeof body);
      p.out_data.produce();
      op->started = true;
      p.awaiting[op->msg_id] = op;
      p.sendq.pop_front();
      moved = true;
      continue;
    }
    bool full = false;
    do {
      uint8_t* slot = p.out_data.producer_slot(&corrupt);
      if (slot == nullptr) {
        full = true;
        break;
      }
      uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(kCellPayload, r->bytes - op->pushed));
      CellHeader h = make_header(CellType::kEager, r->tag, op->msg_id, r->bytes, op->pushed, n, r->desc);
      std::memcpy(slot, &h, sizeof h);
      if (n > 0) std::memcpy(slot + sizeof h, static_cast<const uint8_t*>(r->buffer) + op->pushed, n);
      p.out_data.produce();
      op->started = true;
      op->pushed += n;
      moved = true;
    } while (op->pushed < r->bytes);
    if (full) break;
    p.sendq.pop_front();
    complete_send(p, op);  // every byte is in the ring: the buffer may be reused
  }
  if (corrupt) {
    protocol_error(p, "impossible ring indices in its segment");
    return true;
  }
  if (moved) notify_segment(p.seg.header());
  return moved;
}

void ShmEngine::complete_send(Peer&, SendOp* op) {
  Request* req = op->req;
  delete op;
  matcher_.complete_ok(req);
}

// ---- receiving

bool ShmEngine::poll_ctrl(Peer& p) {
  bool moved = false;
  for (int i = 0; i < kCellsPerRound; ++i) {
    bool corrupt = false;
    const uint8_t* slot = p.in_ctrl.consumer_slot(&corrupt);
    if (corrupt) {
      protocol_error(p, "impossible control ring indices");
      return true;
    }
    if (slot == nullptr) break;
    CellHeader h;
    std::memcpy(&h, slot, sizeof h);  // copy first: the peer could change it under us
    auto it = p.awaiting.find(h.msg_id);
    if (it == p.awaiting.end() ||
        (h.type != static_cast<uint32_t>(CellType::kAck) && h.type != static_cast<uint32_t>(CellType::kSendChunks))) {
      protocol_error(p, string_printf("unexpected control cell (type %u, message %" PRIu64 ")", h.type, h.msg_id));
      return true;
    }
    SendOp* op = it->second;
    p.awaiting.erase(it);
    if (h.type == static_cast<uint32_t>(CellType::kAck)) {
      complete_send(p, op);
    } else {
      op->pushed = 0;
      p.chunk_ops.push_back(op);
    }
    if (p.in_ctrl.consume()) notify_segment(p.seg.header());
    moved = true;
  }
  return moved;
}

bool ShmEngine::poll_data(Peer& p) {
  bool moved = false;
  for (int i = 0; i < kCellsPerRound; ++i) {
    bool corrupt = false;
    const uint8_t* slot = p.in_data.consumer_slot(&corrupt);
    if (corrupt) {
      protocol_error(p, "impossible data ring indices");
      return true;
    }
    if (slot == nullptr) break;
    CellHeader h;
    std::memcpy(&h, slot, sizeof h);
    const uint8_t* payload = slot + sizeof h;
    if (h.payload_bytes > kCellPayload || h.msg_bytes > kMaxMessageBytes || h.offset > h.msg_bytes ||
        h.payload_bytes > h.msg_bytes - h.offset) {
      protocol_error(p, string_printf("cell of message %" PRIu64 " out of bounds (offset %" PRIu64 ", %u bytes of %" PRIu64 ")",
                                      h.msg_id, h.offset, h.payload_bytes, h.msg_bytes));
      return true;
    }
    const auto type = static_cast<CellType>(h.type);
    if (type == CellType::kRts || (type == CellType::kEager && h.offset == 0)) {
      if (!handle_announce(p, h, payload)) return moved;  // paused on budget, or failed
    } else if (type == CellType::kEager || type == CellType::kChunk) {
      auto* m = static_cast<InMsg*>(matcher_.find(p.rank, h.msg_id));
      if (m == nullptr || m->complete || m->rndv != (type == CellType::kChunk) || (m->rndv && !m->chunked) ||
          m->bytes != h.msg_bytes || m->received != h.offset || h.payload_bytes == 0) {
        protocol_error(p, string_printf("cell of message %" PRIu64 " out of sequence", h.msg_id));
        return true;
      }
      uint8_t* dst = m->target();
      if (dst != nullptr) std::memcpy(dst + h.offset, payload, h.payload_bytes);
      m->received += h.payload_bytes;
      if (m->received == m->bytes) matcher_.message_complete(m);
    } else {
      protocol_error(p, string_printf("unknown cell type %u", h.type));
      return true;
    }
    if (p.in_data.consume()) notify_segment(p.seg.header());
    moved = true;
    if (!poison_.ok()) return true;
  }
  return moved;
}

// The first cell of a message. False when the cell must stay in the ring (the unexpected
// budget is full) or the transport failed.
bool ShmEngine::handle_announce(Peer& p, const CellHeader& h, const uint8_t* payload) {
  const bool rndv = h.type == static_cast<uint32_t>(CellType::kRts);
  if (h.msg_id <= p.last_announced) {
    protocol_error(p, string_printf("message id %" PRIu64 " after %" PRIu64, h.msg_id, p.last_announced));
    return false;
  }
  RtsBody body{};
  if (rndv) {
    if (h.payload_bytes != sizeof body) {
      protocol_error(p, "malformed rendezvous cell");
      return false;
    }
    std::memcpy(&body, payload, sizeof body);
    if (body.pid != p.pid) {
      protocol_error(p, string_printf("rendezvous from pid %" PRId64 ", not %d", body.pid, static_cast<int>(p.pid)));
      return false;
    }
  } else if ((h.payload_bytes == 0) != (h.msg_bytes == 0)) {
    protocol_error(p, "empty first cell of a non-empty message");
    return false;
  }
  // Budget full (kPaused): never drop; the cell stays in the ring (the sender stalls when it
  // fills) until a receive is posted or buffered messages are consumed.
  transport::Matcher::Arrival how;
  InMsg* m = matcher_.arrive<InMsg>(p.rank, h.msg_id, h.tag, h.msg_bytes, h.desc, !rndv, p.draining, &how);
  if (m == nullptr) return false;
  m->rndv = rndv;
  m->src_pid = body.pid;
  m->src_addr = body.address;
  p.last_announced = h.msg_id;
  if (rndv) {
    if (m->recv != nullptr) start_pull(p, m);
    return true;
  }
  uint8_t* dst = m->target();
  if (dst != nullptr && h.payload_bytes > 0) std::memcpy(dst, payload, h.payload_bytes);
  m->received = h.payload_bytes;
  if (m->received == m->bytes) matcher_.message_complete(m);
  return true;
}

// A rendezvous message met its receive. Its reply must fit in the sender's control ring
// before we take it: otherwise it waits (in order) in pulls_waiting, retried by progress
// once the sender consumed some replies (it wakes us when it frees a full ring).
void ShmEngine::start_pull(Peer& p, InMsg* m) {
  if (p.pulls_waiting.empty() && reply_fits(p)) {
    pull_now(p, m);
  } else {
    p.pulls_waiting.push_back(m);
  }
}

bool ShmEngine::retry_pulls(Peer& p) {
  bool moved = false;
  while (!p.pulls_waiting.empty() && poison_.ok() && reply_fits(p)) {
    InMsg* m = p.pulls_waiting.front();
    p.pulls_waiting.pop_front();
    if (m->recv == nullptr) {
      // Its receive was cancelled: release the sender's buffer without reading it.
      push_reply(p, CellType::kAck, *m);
      matcher_.forget(m);
    } else {
      pull_now(p, m);
    }
    moved = true;
  }
  return moved;
}

// True when one more control cell can go to the peer right now.
bool ShmEngine::reply_fits(Peer& p) {
  if (!p.ctrl_out.empty() || !p.out_ctrl.valid()) return false;
  bool corrupt = false;
  const bool room = p.out_ctrl.producer_slot(&corrupt) != nullptr;  // also asks to be woken when full
  if (corrupt) protocol_error(p, "impossible control ring indices in its segment");
  return room;
}

// Called only after reply_fits: the cell goes straight into the ring.
void ShmEngine::push_reply(Peer& p, CellType type, const InMsg& m) {
  p.ctrl_out.push_back(make_header(type, m.tag, m.msg_id, m.bytes, 0, 0, m.desc));
  push_sends(p);
}

// Copy the message straight from the sender's buffer, or ask for it through the ring when
// cross-memory attach is not allowed.
void ShmEngine::pull_now(Peer& p, InMsg* m) {
  if (!force_ring_copy_ && !p.cma_unsupported) {
    int error = 0;
    PullResult r = pull_from_peer(static_cast<pid_t>(m->src_pid), m->src_addr, m->recv->buffer, m->bytes, &error);
    if (r == PullResult::kOk) {
      // A sender that cancels a rendezvous send poisons itself (publishing its state) before
      // cancel returns, i.e. before its buffer can be freed: a state still ALIVE after the
      // copy means the bytes we read were the message.
      // (Left pending, matched but not taken: check_peers, later this round or in the next
      // wait, fails the receive. Not called from here: we may be inside its ring drain.)
      if (p.seg.header()->state.load(std::memory_order_acquire) != static_cast<uint32_t>(RankState::kAlive)) return;
      m->received = m->bytes;
      push_reply(p, CellType::kAck, *m);
      matcher_.message_complete(m);
      return;
    }
    if (r == PullResult::kFailed) {
      // A dead or failed sender explains it better than we can.
      if (!p.same_process && !p.process.alive()) {
        poison_locked(make_status(COLLX_ERR_REMOTE, "rank %d died (pid %d exited)", p.rank, static_cast<int>(p.pid)),
                      false);
      } else if (p.seg.header()->state.load(std::memory_order_acquire) == static_cast<uint32_t>(RankState::kAlive)) {
        protocol_error(p, string_printf("cannot read its %" PRIu64 "-byte buffer: %s", m->bytes, std::strerror(error)));
      }  // else check_peers reports its state
      return;
    }
    COLLX_INFO(NET, "rank %d: process_vm_readv from rank %d not permitted (%s): copying through the ring", rank_,
               p.rank, std::strerror(error));
    p.cma_unsupported = true;
  }
  m->chunked = true;
  push_reply(p, CellType::kSendChunks, *m);
}

// A receive took a message still arriving: a rendezvous one is pulled now (eager bytes land
// in staging and are copied when the last one arrives).
void ShmEngine::matcher_took_unexpected(transport::InMessage* taken) {
  auto* m = static_cast<InMsg*>(taken);
  if (m->rndv) start_pull(*peers_[m->peer], m);
}

// An announcement left in `peer`'s ring may fit now: the driver looks at every ring each
// round, so only a sleeping driver needs waking.
void ShmEngine::matcher_resume(int) { notify_segment(own_header_); }

void ShmEngine::matcher_poison(const Status& status, bool notify_peers) { poison_locked(status, notify_peers); }

// ---- peers' states, liveness, failures

void ShmEngine::check_peers(bool check_processes) {
  for (auto& pp : peers_) {
    Peer& p = *pp;
    if (p.rank == rank_ || p.departed || !poison_.ok()) continue;
    SegmentHeader* h = p.seg.header();
    const auto state = static_cast<RankState>(h->state.load(std::memory_order_acquire));
    if (state != RankState::kAlive) tsan_acquire(tsan_sync_address(comm_id_, ~0ull, p.rank));
    switch (state) {
      case RankState::kAlive:
        check_peer_active_op(p);
        if (!poison_.ok()) return;
        if (check_processes && !p.same_process && !p.process.alive()) {
          poison_locked(make_status(COLLX_ERR_REMOTE, "rank %d died (pid %d exited)", p.rank, static_cast<int>(p.pid)),
                        false);
        }
        break;
      case RankState::kLeft: {
        // Everything it sent before leaving is in our rings: take it (budget or not).
        p.draining = true;
        for (int round = 0; round < (1 << 20) && poison_.ok(); ++round) {
          bool moved = poll_ctrl(p);
          moved |= poll_data(p);
          if (!moved) break;
        }
        if (poison_.ok()) peer_departed(p);
        break;
      }
      case RankState::kPoisoned: {
        char reason[kReasonBytes];
        std::memcpy(reason, h->reason, sizeof reason);
        reason[sizeof reason - 1] = '\0';
        for (char* c = reason; *c; ++c) {
          if (static_cast<unsigned char>(*c) < 0x20 || static_cast<unsigned char>(*c) > 0x7e) *c = '?';
        }
        const collx_status_t code = status_code_from_peer(h->reason_code.load(std::memory_order_relaxed));
        poison_locked(make_status(COLLX_ERR_REMOTE, "rank %d failed: %s: %s", p.rank, status_name(code), reason)
                          .with_remote_code(code),
                      false);
        break;
      }
      case RankState::kAborted:
        poison_locked(make_status(COLLX_ERR_REMOTE, "rank %d aborted (pid %d)", p.rank, static_cast<int>(p.pid)),
                      false);
        break;
      default:
        protocol_error(p, string_printf("invalid state word %u", static_cast<unsigned>(state)));
        break;
    }
  }
}

void ShmEngine::peer_departed(Peer& p) {
  p.departed = true;
  COLLX_INFO(NET, "rank %d: rank %d left the communicator", rank_, p.rank);
  poll_board_waits(p);  // what it published before it left stands
  fail_peer_requests(p, make_status(COLLX_ERR_REMOTE, "rank %d left the communicator", p.rank));
}

void ShmEngine::fail_peer_requests(Peer& p, const Status& status) {
  auto fail = [&](Request* req) { matcher_.complete(req, status); };
  matcher_.fail_peer(p.rank, status);  // posted receives, messages in progress
  for (Request* req : p.board_waits) {
    recycle_board_wait(static_cast<BoardWait*>(req->transport_private));
    fail(req);
  }
  p.board_waits.clear();
  for (SendOp* op : p.sendq) { fail(op->req); delete op; }
  for (SendOp* op : p.chunk_ops) { fail(op->req); delete op; }
  for (auto& [id, op] : p.awaiting) { fail(op->req); delete op; }
  p.sendq.clear();
  p.chunk_ops.clear();
  p.awaiting.clear();
  p.ctrl_out.clear();
  p.pulls_waiting.clear();  // its messages were failed or dropped above
}

void ShmEngine::protocol_error(Peer& p, const std::string& why) {
  poison_locked(make_status(COLLX_ERR_PROTOCOL, "rank %d: protocol violation by rank %d (pid %d): %s", rank_, p.rank,
                            static_cast<int>(p.pid), why.c_str()),
                true);
}

void ShmEngine::poison_locked(const Status& status, bool notify_peers) {
  if (!matcher_.begin_poison(status)) {
    // Already failed; pass the first reason on if now asked to tell the others.
    if (notify_peers && !aborted_.load(std::memory_order_relaxed) && !closed_) publish_state(RankState::kPoisoned, poison_);
    return;
  }
  if (!closed_) {
    COLLX_INFO(NET, "rank %d: shm transport failed: %s: %s", rank_, status_name(poison_.code()),
               poison_.message().c_str());
  }
  for (auto& p : peers_) fail_peer_requests(*p, poison_);
  if (notify_peers && !aborted_.load(std::memory_order_relaxed) && !closed_) publish_state(RankState::kPoisoned, poison_);
  notify_waiters();
}

// Our state word leaves ALIVE once; every peer is woken to look at it.
void ShmEngine::publish_state(RankState state, const Status& reason) {
  if (state_published_.exchange(true)) return;
  if (state == RankState::kPoisoned) {
    const std::string& text = reason.message();
    size_t n = std::min(text.size(), kReasonBytes - 1);
    std::memcpy(own_header_->reason, text.data(), n);
    own_header_->reason[n] = '\0';
    own_header_->reason_code.store(static_cast<int32_t>(reason.cause_code()), std::memory_order_relaxed);
  }
  tsan_release(tsan_sync_address(comm_id_, ~0ull, rank_));
  own_header_->state.store(static_cast<uint32_t>(state), std::memory_order_release);
  wake_peers();
}

void ShmEngine::wake_peers() {
  for (auto& p : peers_) {
    if (p->rank != rank_ && p->seg.mapped()) notify_segment(p->seg.header());
  }
}

}  // namespace shm
}  // namespace collx
